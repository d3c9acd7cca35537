"""The command line: synthesize C for a spec file (default), plus subcommands.

Only this module writes to stdout. User errors (``MorelloError``) print one message and
exit with its code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs

from morello import __version__
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.db.sqlite import default_db_path, file_stats, open_table
from morello.errors import ExitCode, MorelloError, TargetError, read_failure
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.plugins import CALIBRATION_PLUGIN, Plugins
from morello.search.solve import SearchStats, synthesize

EPILOG = """\
examples (TARGET is a name that --list-targets prints):
  python -m morello --list-targets
  python -m morello --target TARGET examples/matmul_64.lark           print the C
  python -m morello --target TARGET examples/matmul_64.lark --check   compile, run, compare
  python -m morello --target TARGET examples/matmul_64.lark -o out/mm write out/mm.c, out/mm.h
  python -m morello --target TARGET examples/matmul_64.lark --impl --stats
  python -m morello --target TARGET examples/matmul_64.lark --no-db   keep no memo table file
  python -m morello --target TARGET examples/matmul_512_parallel.lark --threads 2
                                               a 'parallel func' with loops on 2 threads
  python -m morello db stats --target TARGET                          inspect the memo table
  python -m morello precompute --target TARGET --op matmul --up-to 32 fill it on Dask
  python -m morello fidelity --target TARGET examples/matmul_64.lark  time the 50 cheapest
  python -m morello calibrate --target TARGET                         fit the cost model here
  python -m morello kernels --target TARGET --rules my.rules --check  test your kernels
"""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (the usage itself is one --help away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def _count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``least``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, found {text!r}") from None
        if n < least:
            raise argparse.ArgumentTypeError(f"must be {least} or more, found {n}")
        return n

    return parse


def _amount(*, positive: bool) -> Callable[[str], float]:
    """An argparse type: a finite number above zero (``positive``) or at least zero."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
        if not math.isfinite(x) or x < 0 or (positive and x == 0):
            bound = "above 0" if positive else "0 or more"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, found {text}")
        return x

    return parse


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello",
        description="Synthesize fast C for the tensor program in a spec file.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", nargs="?", help="spec file (.lark) to synthesize")
    p.add_argument("--target", "-t", help="target to synthesize for (see --list-targets)")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write FILE.c and FILE.h instead of printing C"
    )
    p.add_argument(
        "--impl",
        action="store_true",
        help="print the Impl tree instead of C (with -o the C is written too)",
    )
    p.add_argument("--stats", action="store_true", help="print search statistics")
    p.add_argument(
        "--json", action="store_true", help="print search statistics as JSON (implies --stats)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compile the C, run it on random inputs and compare with NumPy (exit 1 on mismatch)",
    )
    p.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="PATH",
        help="extra .rules file or folder to load (repeatable; always enabled)",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="memo table file (default: a per-target file in the user's cache folder)",
    )
    p.add_argument("--no-db", action="store_true", help="keep the memo table in memory only")
    _add_threads(p)
    _add_jobs(p)
    p.add_argument("--list-targets", action="store_true", help="list installed targets and exit")
    p.add_argument("--version", action="version", version=f"morello {__version__}")
    return p


def _add_table_and_rules(p: argparse.ArgumentParser) -> None:
    """--db, --no-db, --rules and --threads, as the commands that synthesize take them."""
    p.add_argument("--db", metavar="PATH", help="memo table file (default: the target's)")
    p.add_argument("--no-db", action="store_true", help="keep the memo table in memory only")
    p.add_argument("--rules", action="append", default=[], metavar="PATH", help="extra rule files")
    _add_threads(p)


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="most threads a parallel loop of a 'parallel func' may run on, from 1 to the "
        "target's processors (default: all of them, whatever this machine has, so the C "
        "does not depend on it); 1 makes a 'parallel func' an error",
    )


def _add_jobs(p: argparse.ArgumentParser) -> None:
    from morello.search.parallel import default_jobs

    jobs = default_jobs()
    p.add_argument(
        "--jobs",
        "-j",
        type=_count(1),
        default=jobs,
        metavar="N",
        help="processes that search at once, trading what each solved (default: one per "
        f"core, at most 4; here {jobs}); the program is the same for any N",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m morello``; returns the exit code.

    Output piped into a program that stops reading early (``| head``) ends the run quietly
    with ``ExitCode.BROKEN_PIPE`` (what a shell gives a command killed by SIGPIPE), not a
    traceback; Ctrl-C ends it with one line and ``ExitCode.INTERRUPTED``.
    """
    try:
        code = _main(argv)
        sys.stdout.flush()  # inside the try: a closed pipe is found here, not at exit
    except KeyboardInterrupt:
        # The memo table was flushed on the way out (what the search solved is kept), and
        # helper walks were stopped.
        print("morello: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # Nothing more can be written; point stdout at /dev/null so that the interpreter's
        # own flush at exit does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    return code


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "db":
        return _db_main(argv[1:])
    if argv and argv[0] == "bench":
        return _bench_main(argv[1:])
    if argv and argv[0] == "precompute":
        return _precompute_main(argv[1:])
    if argv and argv[0] == "fidelity":
        return _fidelity_main(argv[1:])
    if argv and argv[0] == "calibrate":
        return _calibrate_main(argv[1:])
    if argv and argv[0] == "kernels":
        return _kernels_main(argv[1:])
    args = _parse(_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        return _run(args)
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code of --help, --version or a usage error (which
    argparse has printed)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE_ERROR


def _run(args: argparse.Namespace) -> int:
    plugins = Plugins()
    if args.list_targets:
        installed = plugins.targets()
        if not installed:
            print("no targets installed; run `pip install -e .`")
        for it in installed:
            print(f"{it.target.name:12} {it.target.description}  [{it.dist}]")
        return ExitCode.OK
    if args.spec is None:
        raise MorelloError("no spec file given (see --help)")
    ctx, solved = _synthesize_file(args, plugins)
    unit = Path(args.output).stem if args.output else Path(args.spec).stem
    source = lower_to_c(unit, [(p, i) for p, i, _ in solved], ctx)
    if args.impl:
        for program, impl, _ in solved:
            print(f"# {program.name}")
            print(format_impl(impl, ctx))
    if args.output:
        _write_unit(Path(args.output), source.c_text, source.h_text)
    elif not args.impl:
        print(source.c_text, end="")
    if args.stats or args.json:
        _print_stats(solved, args.json)
    if args.check:
        _check(source.c_text, solved, ctx)
    return ExitCode.OK


def _write_unit(base: Path, c_text: str, h_text: str) -> None:
    """Write ``base.c`` and ``base.h`` (a ``.c`` or ``.h`` suffix on ``base`` is dropped), each
    whole or not at all; MorelloError if they cannot be written."""
    if base.suffix in (".c", ".h"):
        base = base.with_suffix("")
    path = base.parent
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
        for path, text in ((base.with_suffix(".c"), c_text), (base.with_suffix(".h"), h_text)):
            part = path.with_name(f".{path.name}.part")
            try:
                part.write_text(text, encoding="utf-8")
                os.replace(part, path)
            finally:
                part.unlink(missing_ok=True)
    except OSError as exc:
        raise MorelloError(f"cannot write {path}: {read_failure(exc)}") from None


def _db_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello db",
        description="Inspect memo-table files.",
        epilog="example:\n  python -m morello db stats --target TARGET --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    st = sub.add_parser(
        "stats", help="solved Specs, boxes, bytes per solved Spec and the ratio to a pickled dict"
    )
    st.add_argument("--db", metavar="PATH", help="memo table file (default: the target's)")
    st.add_argument("--target", "-t", help="target whose default file to inspect")
    st.add_argument("--json", action="store_true", help="print JSON")
    return p


def _db_main(argv: Sequence[str]) -> int:
    args = _db_parser().parse_args(argv)
    try:
        if args.db:
            path = Path(args.db)
        else:
            plugins = Plugins()
            # An unknown target is named as such, not as a file that does not exist.
            path = default_db_path(plugins.target(args.target or _default_target(plugins)).name)
        stats = file_stats(path)
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(_db_stats_text(stats))
    return ExitCode.OK


class _NoBar:
    """What ``_progress_bar`` gives where no bar is drawn."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        """Nothing to draw."""

    def set_description(self, text: str, refresh: bool = True) -> None:
        """Nothing to draw."""


def _progress_bar() -> Any:
    """A progress bar of Specs solved on stderr, shown once a synthesis has run for a
    second, on a terminal only (tqdm is imported only then)."""
    if not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(
        unit=" Specs",
        delay=1.0,
        leave=False,
        dynamic_ncols=True,
        file=sys.stderr,
        bar_format="{desc}{n_fmt} Specs solved [{elapsed}, {rate_fmt}]",
    )


def _db_stats_text(st: dict[str, Any]) -> str:
    boxes = st["boxes"] or 1
    lines = [
        f"memo table {st['path']} (target {st['target']}, format {st['format']})",
        f"  namespaces        {st['namespaces']}",
        f"  tables            {st['tables']}",
        f"  solved Specs      {st['solved']}  ({st['solved'] / boxes:.1f} per box)",
        f"  boxes             {st['boxes']}",
        f"  decisions         {st['decisions']}",
        f"  points answered   {st['points']}  ({st['points'] / boxes:.1f} per box)",
        f"  file size         {st['bytes']} bytes  ({st['free_bytes']} free)",
    ]
    if st["solved"]:
        lines += [
            f"  per solved Spec   {st['bytes_per_solved']:.1f} bytes",
            f"  pickled dict      {st['pickled_dict_bytes']} bytes  "
            f"({st['pickled_ratio']:.1f}x the file)",
        ]
    return "\n".join(lines)


def _synthesize_file(
    args: argparse.Namespace, plugins: Plugins
) -> tuple[SynthesisContext, list[tuple[Program, Impl, SearchStats]]]:
    """Parse ``args.spec``, build the target's context and synthesize every function."""
    spec_file = parse_spec_file(args.spec)  # syntax errors need no target
    target_name = args.target or _default_target(plugins)
    ctx = make_context(target_name, plugins, args.rules, args.threads)
    programs = [build_program(f, ctx) for f in spec_file.funcs]
    db_path = None if args.no_db else Path(args.db or default_db_path(ctx.target.name))
    table = open_table(db_path, ctx)
    solved: list[tuple[Program, Impl, SearchStats]] = []
    try:
        with _progress_bar() as bar:
            for program in programs:
                bar.set_description(f"synthesizing {program.name}", refresh=False)
                impl, stats = synthesize(program.spec, ctx, table, bar.update, jobs=args.jobs)
                solved.append((program, impl, stats))
                table.release()  # saved; what this function alone needed is let go
    finally:
        table.close()
    for func, (program, impl, _) in zip(spec_file.funcs, solved, strict=True):
        if not program.spec.serial and impl.threads() == 1:
            why = (
                "its result has one element, and a parallel loop splits the result, not a reduction"
                if program.spec.operands[-1].volume == 1
                else "no parallel loop is cheaper than the serial code at this size"
            )
            print(
                f"{func.loc}: warning: parallel func {func.name} runs on one thread: {why}",
                file=sys.stderr,
            )
    return ctx, solved


BENCH_DESCRIPTION = """\
Synthesize (or read from the memo table), check against NumPy, then time the generated
code, its peers and the machine's limits in the same run.

Peers are the libraries the target names. For any op or graph, array libraries run it as
array code on the same input values: NumPy's sequence of the ops (its BLAS for products),
always, and JAX's jax.jit of the whole when JAX is installed (pip install 'morello[jax]'),
timed per call from Python. For a matrix product, BLAS libraries are called from the same C
loop on the same buffers as the generated function (a row-major copy where its layout is
packed): NumPy's OpenBLAS, always, and Intel MKL when it is installed (pip install
'morello[peers]', which installs JAX too). A
matrix product runs gemm, and also gemv where an output extent is 1 (the faster is kept);
bf16 inputs also run the f32 routines on the same values (peers named LIB_f32). Each peer
runs in a child process whose environment holds the target's settings for it (threads,
instruction sets), since a library reads them when it loads. Every peer is checked against
NumPy before it is timed, and reports which routine ran and what the library says of
itself (OpenBLAS's kernel family, MKL's instruction set and threads). The generated code
and every peer routine are timed in the same rounds, one batch of each in turn (--repeats
rounds), so that the machine's changes of speed during the run fall on all of them alike.
Ours runs on 4 placements of its buffers within a page, the same in every run, and its time
is the median placement's: where arrays land can decide whether loads wait on stores to
addresses 4 KiB apart (4K aliasing), which halves the speed of some programs.

The limits: the FMA peak (independent FMAs in the target's vector width) and the one-core
read bandwidth (a buffer twice the largest cache, and one of the Spec's own size). Our
time is reported as a fraction of the bound that applies: compute at the peak, or traffic
at the bandwidth, whichever is slower. Each peer's ratio = its median time / ours (above 1:
Morello is faster); the last line gives the best peer's.
"""


PRECOMPUTE_DESCRIPTION = """\
Solve every Spec of an op up to a size bound and store it in the memo table, so that
later syntheses of those shapes expand no Spec.

The goals are the op's root Specs (operands in main memory, serial, the full memory
limits) for every size up to --up-to that the rule set's size policies name (1, 2, 3, 4,
6, 8, 12, ... for pow2_3), every layout family a spec file may name without a parameter
(row_major, col_major) for each operand, and every assignment of --dtypes to the operands
that the target implements. Solving a root solves every Spec below it.

Work runs on Dask: a local cluster of --workers processes by default, or the workers of
the scheduler at --scheduler (they must be able to read the file at --db: a shared file
system).
Goals are solved in stages, smaller sizes first; this process alone writes the file, one
short transaction per finished task, so an interrupted run keeps what it stored and
resumes where it stopped. Two precomputes into one file at once are refused.
"""


def _precompute_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello precompute",
        description=PRECOMPUTE_DESCRIPTION,
        epilog="example:\n  python -m morello precompute --target TARGET --op matmul --up-to 32",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--target", "-t", help="target to solve for (see --list-targets)")
    p.add_argument("--op", required=True, help="op to solve (as named in the rule files)")
    p.add_argument(
        "--up-to", type=_count(1), required=True, metavar="N", help="largest size of every index"
    )
    p.add_argument(
        "--dtypes",
        default="f32",
        metavar="LIST",
        help="comma-separated dtypes the operands may take (default f32); every combination "
        "the target implements is solved, e.g. bf16 inputs into an f32 output",
    )
    p.add_argument(
        "--workers",
        type=_count(1),
        metavar="N",
        help="processes of the local Dask cluster (default: this machine's cores)",
    )
    p.add_argument("--scheduler", metavar="ADDRESS", help="use the Dask cluster at ADDRESS instead")
    p.add_argument(
        "--connect-timeout",
        type=_amount(positive=True),
        default=30.0,
        metavar="S",
        help="seconds to wait for the scheduler at --scheduler (default 30)",
    )
    p.add_argument("--db", metavar="PATH", help="memo table file (default: the target's)")
    p.add_argument("--rules", action="append", default=[], metavar="PATH", help="extra rule files")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_threads(p)
    return p


def _precompute_main(argv: Sequence[str]) -> int:
    args = _parse(_precompute_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        from morello.precompute import precompute

        plugins = Plugins()
        target_name = args.target or _default_target(plugins)
        ctx = make_context(target_name, plugins, args.rules, args.threads)
        db = Path(args.db or default_db_path(ctx.target.name))
        dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        report = precompute(
            ctx,
            args.op,
            args.up_to,
            dtypes,
            db,
            rules=[str(Path(r).resolve()) for r in args.rules],
            workers=args.workers,
            scheduler=args.scheduler,
            connect_timeout=args.connect_timeout,
        )
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    fields = attrs.asdict(report)
    if args.json:
        print(json.dumps({"db": str(db), **fields}, indent=2))
    else:
        print(
            f"{db}: {report.goals} goals, {report.already} already stored, "
            f"{report.solved_goals} solved ({report.no_implementation} with no implementation) "
            f"in {report.stages} stages on {report.workers} workers; {report.specs_solved} "
            f"Specs solved in {report.seconds:.1f} s"
        )
    return ExitCode.OK


def _bench_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello bench",
        description=BENCH_DESCRIPTION,
        epilog="example:\n  python -m morello bench --target TARGET examples/matmul_64.lark --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", help="spec file (.lark) to benchmark")
    p.add_argument("--target", "-t", help="target to synthesize for (see --list-targets)")
    p.add_argument("--json", action="store_true", help="print a JSON object (a list for several)")
    p.add_argument(
        "--repeats",
        type=_count(1),
        default=7,
        help="timed rounds, one batch of each side per round (default 7)",
    )
    p.add_argument(
        "--min-batch",
        type=_amount(positive=True),
        default=0.05,
        metavar="S",
        help="seconds per batch (default 0.05)",
    )
    _add_table_and_rules(p)
    _add_jobs(p)
    return p


def _bench_main(argv: Sequence[str]) -> int:
    args = _parse(_bench_parser(), argv)
    if isinstance(args, int):
        return args
    from morello.codegen.bench import bench, require_native  # NumPy, ctypes, peers: bench only

    try:
        plugins = Plugins()
        require_native(plugins.target(args.target or _default_target(plugins)))
        ctx, solved = _synthesize_file(args, plugins)
        _require_isa(solved, ctx)
        rows = bench(
            Path(args.spec).stem,
            [(p, i, s.seconds) for p, i, s in solved],
            ctx,
            args.repeats,
            args.min_batch,
        )
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    for r in rows:
        r["spec"] = f"{args.spec}:{r['spec'].split(':', 1)[1]}"
    if args.json:
        print(json.dumps(rows if len(rows) != 1 else rows[0], indent=2))
    else:
        for r in rows:
            print(_bench_text(r))
    return ExitCode.OK


FIDELITY_DESCRIPTION = """\
How well the cost model ranks programs: for each function of the spec file, its --top
cheapest programs under the model, each compiled, checked against NumPy and timed against
the chosen program (a C loop on the same buffers, calls of the two alternating in groups of
at least 50 us, so that other work on the machine slows both alike; --rounds rounds, the
median round's ratio), on --placements placements of the buffers within a page as bench
times ours, each program's time the median placement's. With --batches they are timed as
before instead: batches of all the programs taken in turn, the median of --repeats.

The programs come from a pool: the exact cheapest predicted costs (a lazy k-best search
over the memo table) and random programs near the chosen one (about two decisions drawn at
random each). Programs that print the same C count once, and one joins the list only if
it is predicted at least --spacing dearer than the one before (the nearest rivals of a
large Spec are often within 0.05% of each other, far below what timing resolves).

Prints Kendall's tau and Spearman's rho between predicted cost and measured time (1: the
same order), where the measured-fastest program sits in the predicted order (0: the chosen
one) and how much faster it is than the chosen one. The least of many noisy times is biased
low (even among programs of equal speed one draws a fast time), so the --rematch programs
measured fastest, where faster than the chosen one, are timed again against it, each pair
alone with calls alternating as benchmarks/ab.py times two programs, and that figure is
printed beside the first. Needs SciPy (pip install 'morello[fit]'); --plot needs
matplotlib (pip install 'morello[plot]').
"""


def _fidelity_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello fidelity",
        description=FIDELITY_DESCRIPTION,
        epilog="example:\n  python -m morello fidelity --target TARGET examples/matmul_64.lark "
        "--top 20 --plot fidelity.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", help="spec file (.lark) whose functions to rank")
    p.add_argument("--target", "-t", help="target to synthesize for (see --list-targets)")
    p.add_argument(
        "--top", type=_count(1), default=50, metavar="N", help="programs to time (default 50)"
    )
    p.add_argument(
        "--spacing",
        type=_amount(positive=False),
        default=0.01,
        metavar="R",
        help="least relative gap in predicted cost between listed programs (default 0.01)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw predicted cost against time")
    p.add_argument(
        "--trees", action="store_true", help="with --json: each program's Impl tree as text"
    )
    p.add_argument("--json", action="store_true", help="print a JSON object (a list for several)")
    p.add_argument(
        "--rounds",
        type=_count(1),
        default=3,
        metavar="N",
        help="rounds of alternating calls per program and placement (default 3)",
    )
    p.add_argument(
        "--batches",
        action="store_true",
        help="time all the programs in batches taken in turn instead of each against the "
        "chosen one",
    )
    p.add_argument(
        "--repeats",
        type=_count(1),
        default=5,
        help="with --batches: timed batches per program (default 5)",
    )
    p.add_argument(
        "--min-batch",
        type=_amount(positive=True),
        default=0.02,
        metavar="S",
        help="with --batches: seconds per batch (default 0.02)",
    )
    p.add_argument(
        "--placements",
        type=_count(1),
        default=4,
        metavar="N",
        help="buffer placements within a page to time each program on, as bench does; "
        "each program's time is the median placement's (default 4; 1: where NumPy puts them)",
    )
    p.add_argument(
        "--rematch",
        type=_count(0),
        default=3,
        metavar="N",
        help="time the N programs measured fastest, where faster than the chosen one, again "
        "against it, calls alternating (default 3; 0: no rematch)",
    )
    _add_table_and_rules(p)
    return p


def _fidelity_main(argv: Sequence[str]) -> int:
    args = _parse(_fidelity_parser(), argv)
    if isinstance(args, int):
        return args
    from morello.codegen import fidelity  # NumPy, SciPy, ctypes: this command only

    try:
        plugins = Plugins()
        target_name = args.target or _default_target(plugins)
        spec_file = parse_spec_file(args.spec)  # a bad spec file is reported first
        ctx = make_context(target_name, plugins, args.rules, args.threads)
        programs = [build_program(f, ctx) for f in spec_file.funcs]
        db_path = None if args.no_db else Path(args.db or default_db_path(ctx.target.name))
        table = open_table(db_path, ctx)
        reports = []
        try:
            for program in programs:
                reports.append(
                    fidelity.fidelity(
                        program,
                        ctx,
                        table,
                        args.top,
                        args.repeats,
                        args.min_batch,
                        args.spacing,
                        (lambda impl: format_impl(impl, ctx)) if args.trees else None,
                        args.placements,
                        args.rematch,
                        args.batches,
                        args.rounds,
                    )
                )
                table.release()
        finally:
            table.close()
        if args.plot:
            fidelity.plot(reports, Path(args.plot), f"{args.spec} on {ctx.target.name}")
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    for r in reports:
        r["spec"] = f"{args.spec}:{r['function']}"
    if args.json:
        print(json.dumps(reports if len(reports) != 1 else reports[0], indent=2))
    else:
        for r in reports:
            print(_fidelity_text(r))
    return ExitCode.OK


def _rematch_lines(m: dict[str, Any] | None) -> list[str]:
    """The rematch of ``fidelity``'s report, for its text."""
    if m is None:
        return []
    pairs = ", ".join(
        f"rank {k} {first:.3f} then {again:.3f}"
        for k, first, again in zip(m["ranks"], m["first_ratios"], m["ratios"], strict=True)
    )
    f = m["fastest_rank"]
    verdict = (
        "the chosen program is the fastest"
        if f == 0
        else f"rank {f} is {(m['chosen_over_fastest'] - 1) * 100:.1f}% faster than the chosen one"
    )
    return [
        f"  rematch, each alone with the chosen one, calls alternating ({m['rounds']} rounds; "
        f"chosen time over theirs): {pairs}",
        f"  after the rematch: {verdict}",
    ]


def _fidelity_text(r: dict[str, Any]) -> str:
    """A few lines for one ranked function."""
    progs = r["programs"]

    def stat(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    f = r["fastest_rank"]
    lines = [
        f"{r['spec']}: {len(progs)} programs timed (the {r['top']} cheapest asked for, "
        f"{r['spacing']:.1%} apart)",
        f"  kendall tau {stat(r['kendall_tau'])}, spearman rho {stat(r['spearman_rho'])}",
        *(
            []
            if r.get("placement_tau") is None
            else [
                f"  the {r['placements']} buffer placements order the programs alike with "
                f"tau {r['placement_tau']:.3f} (the ceiling for the model's tau)"
            ]
        ),
        f"  measured fastest: rank {f} of the predicted order"
        + (
            ""
            if f == 0
            else f", {(r['chosen_over_fastest'] - 1) * 100:.1f}% faster than the chosen one"
        ),
        *_rematch_lines(r.get("rematch")),
        "  rank        cost      us/call" + ("   GFLOP/s" if r["flops"] else ""),
    ]
    for p in progs:
        g = f"  {p['gflops']:8.2f}" if p["gflops"] else ""
        mark = "  <- fastest" if p["rank"] == f else ""
        lines.append(f"  {p['rank']:4d} {p['cost']:11d} {p['seconds'] * 1e6:12.2f}{g}{mark}")
    return "\n".join(lines)


CALIBRATE_DESCRIPTION = """\
Fit the target's cost coefficients to this machine. Small whole programs built from the
target's own kernels and moves (matrix products of several shapes and layouts, vector-matrix
products that stream their weights, elementwise ops, a softmax) are synthesized, each with
its cheapest rivals under the model, then compiled, checked against NumPy and timed, in
--rounds rounds (the fastest round is kept: other work on a shared machine only slows a
program down). A program's cost is linear in the coefficients, so
they are fitted by non-negative least squares (SciPy: pip install 'morello[fit]'), in
picoseconds: to each program's time (relative error), to the difference in time between
every two programs of one function (what the search must rank), and weakly toward the
defaults scaled as a whole (so that parameters the times barely tell apart stay put).
Then each function is synthesized again under the fitted coefficients, the few cheapest
programs there that were not timed yet are timed too, and the fit is made again with them:
the first rivals are the default model's neighbours, and a fit must not prefer a program
whose time it has never seen.

The result goes to a per-machine file in the user's config folder
($XDG_CONFIG_HOME/morello/calibration/<machine>/<target>.json), which then replaces the
target's default coefficients for every command on this machine (MORELLO_CALIBRATION=off
ignores it; delete the file to go back). The memo table keys its answers by the
coefficients, so answers found under other coefficients are not mixed in. --show prints the
coefficients in use and where they come from, and measures nothing.

The report also says how much a program's rounds spread (its slowest over its fastest, the
median over the programs). Above 10% the machine was busy while it timed them: a run at a
quieter time may fit coefficients several percent apart (those the times barely tell
apart); the two busy runs compared in BENCHMARKS.md still ranked programs alike.
"""


def _calibrate_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello calibrate",
        description=CALIBRATE_DESCRIPTION,
        epilog="examples:\n  python -m morello calibrate --target TARGET\n"
        "  python -m morello calibrate --target TARGET --show",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--target", "-t", help="target to calibrate (see --list-targets)")
    p.add_argument("--show", action="store_true", help="print the coefficients in use and exit")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.add_argument(
        "--rounds",
        type=_count(1),
        default=5,
        help="times each program is timed; its fastest is fitted (default 5)",
    )
    p.add_argument(
        "--per-function",
        type=_count(1),
        default=12,
        metavar="N",
        help="programs timed per training function (default 12)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="fit and print, but write no calibration file"
    )
    p.add_argument("--db", metavar="PATH", help="memo table file (default: the target's)")
    p.add_argument("--no-db", action="store_true", help="keep the memo table in memory only")
    return p


KERNELS_DESCRIPTION = """\
List the kernels of a target's rule set (with --rules files), or check them one by one.

Each line names a kernel, the file and line that declare it, and the smallest Spec its
pattern describes. --check tests each kernel alone: its pattern must match that Spec; a root
in main memory, with the kernel's op served by that kernel only, must use it; and the C of
that root must compile and match NumPy on three inputs. Of a kernel whose code this machine
cannot run only the pattern is checked, and it is reported as skipped, saying why. --check
checks the kernels named, else those of the --rules files, else every kernel. Exits with 1
when a kernel fails its check.
"""


def _kernels_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="morello kernels",
        description=KERNELS_DESCRIPTION,
        epilog="examples:\n  python -m morello kernels --target TARGET\n"
        "  python -m morello kernels --target TARGET --rules my.rules --check\n"
        "  python -m morello kernels --target TARGET --check vadd_f32x8",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="kernels to list or check")
    p.add_argument("--target", "-t", help="target whose rule set to read (see --list-targets)")
    p.add_argument("--rules", action="append", default=[], metavar="PATH", help="extra rule files")
    p.add_argument("--check", action="store_true", help="compile, run and compare each kernel")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    return p


def _kernels_main(argv: Sequence[str]) -> int:
    args = _parse(_kernels_parser(), argv)
    if isinstance(args, int):
        return args
    from morello.codegen import kernel_check
    from morello.lang.rule_sets import expand_rule_paths

    try:
        plugins = Plugins()
        ctx = make_context(args.target or _default_target(plugins), plugins, args.rules, None)
        kernels = list(ctx.ruleset.kernels)
        if args.names:
            known = {k.name for k in kernels}
            for name in args.names:
                if name not in known:
                    raise MorelloError(
                        f"target {ctx.target.name} has no kernel {name!r} (list them with "
                        f"`python -m morello kernels --target {ctx.target.name}`)"
                    )
            kernels = [k for k in kernels if k.name in args.names]
        elif args.check and args.rules:
            mine = {str(p) for p in expand_rule_paths(args.rules)}
            kernels = [k for k in kernels if k.loc is not None and k.loc.path in mine]
            if not kernels:
                raise MorelloError(f"the --rules files declare no kernel for {ctx.target.name}")
        if not args.check:
            rows = [
                {
                    "kernel": k.name,
                    "location": kernel_check.declared_at(k),
                    "pattern": kernel_check.leaf_spec(k, ctx).describe(),
                }
                for k in kernels
            ]
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                for r in rows:
                    print(f"{r['kernel']:28} {r['location']:36} {r['pattern']}")
            return ExitCode.OK
        from morello.codegen.compile import scratch_folder

        reports = []
        with scratch_folder("morello-kernels-") as workdir:
            for k in kernels:
                report = kernel_check.check_kernel(k, ctx, workdir)
                reports.append(report)
                if not args.json:
                    print(
                        f"{report.outcome:8} {report.kernel:28} {report.location}: {report.detail}",
                        flush=True,
                    )
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    counts = {o: sum(r.outcome == o for r in reports) for o in ("passed", "failed", "skipped")}
    if args.json:
        print(json.dumps([attrs.asdict(r) for r in reports], indent=2))
    else:
        print(
            f"{len(reports)} kernel{'' if len(reports) == 1 else 's'} of {ctx.target.name} "
            "checked: " + ", ".join(f"{n} {o}" for o, n in counts.items()),
            file=sys.stderr,
        )
    return ExitCode.CHECK_FAILED if counts["failed"] else ExitCode.OK


def _coefficients_text(coeffs: Any) -> list[str]:
    out = []
    for field in attrs.fields(type(coeffs)):
        value = getattr(coeffs, field.name)
        if isinstance(value, Mapping):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        out.append(f"  {field.name:15} {value}")
    return out


def _calibrate_main(argv: Sequence[str]) -> int:
    args = _parse(_calibrate_parser(), argv)
    if isinstance(args, int):
        return args
    from morello import calibration

    try:
        plugins = Plugins()
        target_name = args.target or _default_target(plugins)
        target = plugins.target(target_name)
        path = calibration.calibration_path(target.name)
        if args.show:
            coeffs = plugins.cost_coefficients(target)
            calibrated = calibration.load(target.name) is not None
            source = str(path) if calibrated else f"the defaults of target {target.name}"
            if args.json:
                doc = {"target": target.name, "calibrated": calibrated, "source": source}
                doc["coefficients"] = calibration.coefficients_json(coeffs)
                print(json.dumps(doc, indent=2))
            else:
                print(f"coefficients of {target.name} from {source}:")
                print("\n".join(_coefficients_text(coeffs)))
            return ExitCode.OK
        from morello.codegen.bench import require_native
        from morello.codegen.calibrate import BUSY_SPREAD, calibrate

        require_native(target, "calibrate")
        # Fit from the plugin's own coefficients, not from an earlier calibration.
        ctx = make_context(target_name, Plugins(block=[CALIBRATION_PLUGIN]), [], None)
        db_path = None if args.no_db else Path(args.db or default_db_path(ctx.target.name))
        table = open_table(db_path, ctx)
        try:
            with _progress_bar() as bar:
                report = calibrate(
                    ctx,
                    table,
                    args.per_function,
                    args.rounds,
                    progress=lambda msg: bar.set_description(msg),
                )
        finally:
            table.close()
        info = {k: v for k, v in report.items() if k != "coefficients"}
        if not args.dry_run:
            calibration.save(target.name, report["coefficients"], info)
    except MorelloError as exc:
        print(exc.format(), file=sys.stderr)
        return int(exc.exit_code)
    if args.json:
        doc = {"target": target.name, "written": None if args.dry_run else str(path), **info}
        doc["coefficients"] = calibration.coefficients_json(report["coefficients"])
        print(json.dumps(doc, indent=2))
    else:
        b, a = report["before"], report["after"]
        print(
            f"{target.name}: {report['programs']} programs of {report['functions']} functions "
            f"timed in {report['seconds']:.0f} s"
        )
        for label, st in (("defaults (best scale):", b), ("after the fit:", a)):
            print(
                f"  {label:22} relative error median {st['median_rel_error']:.1%}, "
                f"max {st['max_rel_error']:.1%}; Kendall tau within a function "
                f"{st['mean_tau']:.2f}; its choice in a function's programs "
                f"{st['chosen_over_fastest']:.3f} x the fastest (geometric mean)"
            )
        print(
            f"  {report['refined']} programs the fit would choose were timed and fitted too "
            "(refinement)"
        )
        spread = report["round_spread"]
        print(
            f"  a program's slowest round was {spread:.0%} slower than its fastest (median)"
            + (
                ": the machine was busy, and a run at a quieter time may fit coefficients "
                "several percent apart"
                if spread > BUSY_SPREAD
                else ""
            )
        )
        print("fitted coefficients (picoseconds):")
        print("\n".join(_coefficients_text(report["coefficients"])))
        print("not written (--dry-run)" if args.dry_run else f"written to {path}")
    return ExitCode.OK


def _bench_text(r: dict[str, Any]) -> str:
    """A few lines for one benchmarked function."""
    us = 1e6
    lines = [
        f"{r['spec']}: morello {r['gflops']:.2f} GFLOP/s, {r['gbps']:.2f} GB/s "
        f"({r['seconds'] * us:.2f} us, spread {r['seconds_low'] * us:.2f}-"
        f"{r['seconds_high'] * us:.2f}), synthesis {r['synthesis_seconds']:.1f} s"
        + (f", on {r['threads_used']} threads" if r["threads_used"] > 1 else "")
    ]
    cpus = os.cpu_count() or 1
    if r["threads_used"] > cpus:
        lines.append(
            f"  note: the code runs on {r['threads_used']} threads, this machine has {cpus} "
            "CPUs (see --threads)"
        )
    for name, p in r["peers"].items():
        lines.append(
            f"  peer {name}: {p['gflops']:.2f} GFLOP/s ({p['seconds'] * us:.2f} us, "
            f"{p['routine']}), ratio {r['ratios'][name]:.2f}"
        )
    for name, why in r["peers_missing"].items():
        lines.append(f"  peer {name}: not timed: {why}")
    if r["best_peer"] is not None:
        lines.append(f"  ratio {r['ratio']:.2f} against {r['best_peer']} (above 1: faster)")
    else:
        lines.append("  no peer computes this op")
    limit = (
        f"FMA peak {r['peak_gflops']:.1f} GFLOP/s"
        if r["bound"] == "compute"
        else f"read bandwidth {max(r['read_gbps'], r['read_gbps_footprint']):.1f} GB/s"
    )
    lines.append(f"  {r['fraction_of_limit']:.0%} of the {limit} ({r['bound']}-bound)")
    return "\n".join(lines)


def _default_target(plugins: Plugins) -> str:
    installed = plugins.targets()
    if len(installed) == 1:
        return installed[0].target.name
    if not installed:
        raise TargetError("no targets installed; run `pip install -e .`")
    names = ", ".join(it.target.name for it in installed)
    raise TargetError(f"several targets are installed ({names}); choose one with --target")


def _print_stats(solved: list[tuple[Program, Impl, SearchStats]], as_json: bool) -> None:
    rows = [
        {
            "function": p.name,
            "cost": impl.cost,
            "specs_visited": s.specs_visited,
            "graph_nodes": s.graph_nodes,
            "graph_edges": s.graph_edges,
            "specs_taken_in": s.specs_taken_in,
            "seconds": round(s.seconds, 4),
        }
        for p, impl, s in solved
    ]
    if as_json:
        print(json.dumps(rows if len(rows) != 1 else rows[0], indent=2))
        return
    for r in rows:
        print(
            f"# {r['function']}: cost {r['cost']}, {r['specs_visited']} specs visited, "
            f"{r['graph_nodes']} graph nodes, {r['graph_edges']} edges, "
            + (f"{r['specs_taken_in']} taken from helpers, " if r["specs_taken_in"] else "")
            + f"{r['seconds']:.3f} s",
            file=sys.stderr,
        )


def _require_isa(solved: list[tuple[Program, Impl, SearchStats]], ctx: SynthesisContext) -> None:
    """Refuse to run generated code where it cannot run: a CPU that lacks what its kernels
    require, another architecture without the target's emulator, no compiler."""
    from morello.codegen.runner import cannot_run  # NumPy: only where code runs

    needed: list[str] = []
    for _, impl, _ in solved:
        for node in impl.walk():
            for f in node.action.requires(ctx):
                if f not in needed:
                    needed.append(f)
    why = cannot_run(ctx.target, needed)
    if why:
        raise MorelloError(f"cannot run the generated code: {why}")


def _check(
    c_text: str, solved: list[tuple[Program, Impl, SearchStats]], ctx: SynthesisContext
) -> None:
    from morello.codegen.compile import compile_shared, scratch_folder
    from morello.codegen.harness import check

    _require_isa(solved, ctx)
    with scratch_folder("morello-check-") as workdir:
        lib = compile_shared(c_text, ctx.target, workdir)
        for program, _, _ in solved:
            result = check(lib, program, ctx)
            how = f"max abs error {result.max_abs_error:.3g}, allowed {result.max_allowed:.3g}"
            if math.isnan(result.max_allowed):  # no element has a bound that is a number
                how = "every element an infinity or NaN equal to NumPy's"
            print(f"check passed: {program.name} matches NumPy ({how})", file=sys.stderr)


def format_impl(impl: Impl, ctx: SynthesisContext, depth: int = 0) -> str:
    """The Impl tree, one line per node: action, Spec, cost and peak memory per level."""
    peaks = " ".join(
        f"{lv.name}={n}" for lv, n in zip(ctx.target.levels, impl.peaks, strict=True) if n
    )
    line = (
        f"{'  ' * depth}{impl.action.describe()}  | {impl.spec.describe()}"
        f"  | cost {impl.cost}  | peak {peaks or '-'}"
    )
    lines = [line]
    for child in impl.children:
        lines.append(format_impl(child, ctx, depth + 1))
    return "\n".join(lines)
