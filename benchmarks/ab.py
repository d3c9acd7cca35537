"""Two C programs of one spec timed against each other in one process.

Wraps ``benchmarks/ab_programs.c``: the function of SPEC (one to three inputs of any
element type: f32, bf16, integers) as
written in OLD.c and in NEW.c (C that ``python -m morello`` or ``benchmarks/forced.py``
wrote, or a hand edit of it) is renamed in a copy of each, both are compiled with the
target's compiler and flags, and the harness checks the outputs against each other, then
alternates calls on the same buffers in 7 rounds. Prints the largest difference between the
outputs, the last round's median times and the median and range over the rounds of old time
over new (above 1: NEW is faster):

    python -m morello --target zen1 examples/dense_relu.lark -o chosen.c
    python benchmarks/forced.py --target zen1 examples/dense_relu.lark -o forced.c \\
        "tile_out: for v1 in 32 x 16"
    python benchmarks/ab.py examples/dense_relu.lark chosen.c forced.c

``--runs N`` runs the harness N times (the machine is shared: compare the runs);
``--placements N`` runs it on N placements of the buffers within a page, the ones
``morello bench`` times (``bench.placement``), since where the buffers lie relative to each
other can change a program's speed (the default, 1, is bench's first placement).
``--define-new NAME`` compiles NEW with the macro NAME set to 1, so one file with switches
(``benchmarks/dense_relu_copies.c``) can be timed against itself without them:

    python benchmarks/ab.py examples/dense_relu.lark benchmarks/dense_relu_copies.c \
        benchmarks/dense_relu_copies.c --define-new PREFETCH --runs 3

``--flag-new FLAG`` compiles NEW with a compiler flag after the target's, so one program can
be timed against itself built otherwise (``--flag-new=-mno-avx256-split-unaligned-store``).

Exits 2 on a spec or compiler error.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from morello.codegen.bench import placement
from morello.context import make_context
from morello.dtypes import Dtype
from morello.errors import MorelloError
from morello.lang.spec_file import build_program, parse_spec_file

HARNESS = Path(__file__).resolve().parent / "ab_programs.c"
_RESULT = re.compile(
    r"largest difference (\S+); last round old (\S+) us, new (\S+) us; "
    r"new/old speed median (\S+) \(range (\S+)-(\S+)\)"
)


class ABError(Exception):
    """A spec the harness cannot call, C that does not compile, or a harness that failed."""


@attrs.frozen
class ABResult:
    """One run of the harness: outputs' largest difference, last round's medians (us), and
    old time over new time: median and range over the rounds."""

    difference: float
    old_us: float
    new_us: float
    ratio: float
    low: float
    high: float
    placement: int = 0


@attrs.frozen
class Harness:
    """What the harness needs of a spec: its function name, argument sizes (elements), work
    per call, the target's compiler command (compiler and flags), and each argument's C
    element type and kind of values (``ab_programs.c``: 0 float, 1 bf16, 2 integer)."""

    name: str
    sizes: tuple[int, ...]
    flops: int
    compiler: tuple[str, ...]
    c_types: tuple[str, ...]
    kinds: tuple[int, ...]


def _kind(dtype: Dtype) -> int:
    """How ``ab_programs.c`` writes and reads values of ``dtype``."""
    if dtype.name == "bf16":
        return 1
    return 0 if dtype.is_float else 2


def harness_for(spec_path: Path, target: str) -> Harness:
    """The function of ``spec_path`` as the harness calls it.

    Raises:
        ABError: not one function, or not one to three inputs.
    """
    ctx = make_context(target)
    funcs = parse_spec_file(str(spec_path), spec_path.read_text(encoding="utf-8")).funcs
    if len(funcs) != 1:
        raise ABError(f"{spec_path}: the harness times one function; the file has {len(funcs)}")
    program = build_program(funcs[0], ctx)
    operands = program.spec.operands
    if len(operands) not in (2, 3, 4):
        raise ABError(f"{spec_path}: the harness calls functions of one to three inputs")
    opdef = ctx.ruleset.ops[program.spec.op]
    sizes = opdef.sizes([t.shape for t in operands])
    assert isinstance(sizes, dict)
    compiler = (ctx.target.compiler.cc, *ctx.target.compiler.flags)
    return Harness(
        funcs[0].name,
        tuple(t.volume for t in operands),
        opdef.flops(sizes),
        compiler,
        tuple(t.dtype.c_type for t in operands),
        tuple(_kind(t.dtype) for t in operands),
    )


def build(
    harness: Harness,
    old_c: Path,
    new_c: Path,
    folder: Path,
    new_defines: Sequence[str] = (),
    new_flags: Sequence[str] = (),
) -> Path:
    """The harness compiled with OLD and NEW renamed apart, NEW with each of
    ``new_defines`` defined to 1 and ``new_flags`` after the target's flags (NEW is then
    compiled on its own); the executable's path."""
    pattern = re.compile(rf"\bvoid\s+{re.escape(harness.name)}\s*\(")
    sources = []
    for label, path in (("old", old_c), ("new", new_c)):
        text, count = pattern.subn(f"void {label}_{harness.name}(", path.read_text("utf-8"), 1)
        if count == 0:
            raise ABError(f"{path}: no definition of void {harness.name}(...)")
        if label == "new":
            text = "".join(f"#define {name} 1\n" for name in new_defines) + text
        sources.append(folder / f"{label}.c")
        sources[-1].write_text(text, encoding="utf-8")
    unused = 4 - len(harness.sizes)  # arguments past the function's, allocated but unused
    sizes = (*harness.sizes, *[1] * unused)
    c_types = (*harness.c_types, *["float"] * unused)
    kinds = (*harness.kinds, *[0] * unused)
    defines = [
        f"-DOLD=old_{harness.name}",
        f"-DNEW=new_{harness.name}",
        f'-DNAME="{harness.name}"',
        f"-DNARGS={len(harness.sizes)}",
        *(f"-DS{i}={n}" for i, n in enumerate(sizes)),
        *(f"-DT{i}={t}" for i, t in enumerate(c_types)),
        *(f"-DK{i}={k}" for i, k in enumerate(kinds)),
        f"-DFLOPS={harness.flops}.0",
    ]
    exe = folder / "ab"
    if new_flags:
        new_object = folder / "new.o"
        _compile([*harness.compiler, *new_flags, "-c", str(sources[1]), "-o", str(new_object)])
        sources[1] = new_object
    cmd = [*harness.compiler, *defines, str(HARNESS)]
    cmd += [*map(str, sources), "-lm", "-o", str(exe)]
    _compile(cmd)
    return exe


def _compile(cmd: Sequence[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ABError(f"the C compiler failed: {proc.stderr.strip()[:2000]}")


def run(exe: Path, where: int = 0, nargs: int = 4) -> ABResult:
    """One run of a built harness, its ``nargs`` buffers on bench's placement ``where``."""
    offsets = [str(placement(where, j)) for j in range(nargs)]
    proc = subprocess.run([str(exe), *offsets], capture_output=True, text=True, check=False)
    found = _RESULT.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise ABError(f"the harness failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return ABResult(*(float(x) for x in found.groups()), placement=where)


def compare(
    spec_path: Path,
    old_c: Path,
    new_c: Path,
    target: str = "zen1",
    runs: int = 1,
    new_defines: Sequence[str] = (),
    placements: int = 1,
    new_flags: Sequence[str] = (),
) -> list[ABResult]:
    """``runs`` runs of the harness on OLD and NEW, the programs of ``spec_path``, on each
    of ``placements`` placements of the buffers (placement by placement)."""
    for name in new_defines:
        if not name.isidentifier():
            raise ABError(f"--define-new {name!r}: not a C macro name")
    harness = harness_for(spec_path, target)
    with tempfile.TemporaryDirectory(prefix="morello-ab-") as tmp:
        exe = build(harness, old_c, new_c, Path(tmp), new_defines, new_flags)
        nargs = len(harness.sizes)
        return [run(exe, where, nargs) for where in range(placements) for _ in range(runs)]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("spec", type=Path, help="spec file with one function")
    p.add_argument("old", type=Path, help="C of the function: the baseline")
    p.add_argument("new", type=Path, help="C of the function: the contender")
    p.add_argument("--target", "-t", default="zen1")
    p.add_argument("--runs", type=int, default=1, help="runs of the harness (default 1)")
    p.add_argument(
        "--placements",
        type=int,
        default=1,
        help="placements of the buffers within a page, each run --runs times (default 1)",
    )
    p.add_argument(
        "--define-new",
        action="append",
        default=[],
        metavar="NAME",
        help="compile NEW with macro NAME defined to 1 (repeatable)",
    )
    p.add_argument(
        "--flag-new",
        action="append",
        default=[],
        metavar="FLAG",
        help="compile NEW with FLAG after the target's flags (repeatable; write"
        " --flag-new=-mFOO for a flag that starts with a dash)",
    )
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.placements < 1:
        p.error("--placements must be at least 1")
    try:
        results = compare(
            args.spec,
            args.old,
            args.new,
            args.target,
            args.runs,
            args.define_new,
            args.placements,
            args.flag_new,
        )
    except (ABError, MorelloError, OSError) as exc:
        print(f"ab.py: error: {exc}", file=sys.stderr)
        return 2
    for r in results:
        where = f"placement {r.placement}: " if args.placements > 1 else ""
        print(
            f"{where}largest difference {r.difference:g}; old {r.old_us:.1f} us,"
            f" new {r.new_us:.1f} us;"
            f" old time / new time {r.ratio:.3f} ({r.low:.3f}-{r.high:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
