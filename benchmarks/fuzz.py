"""Fuzzing: random spec functions through synthesis, compilation and ``--check``.

    python benchmarks/fuzz.py --count 1000 --jobs 2
    python benchmarks/fuzz.py --count 50 --seed 7 --max-extent 12 --keep /tmp/fuzz-failures
    python benchmarks/fuzz.py --count 300 --seed 7100 --memo table --jobs 2
    python benchmarks/fuzz.py --count 100 --seed 7200 --memo table --walks 2

Case ``i`` of seed ``S`` is ``morello.fuzzing.case_for_seed(S, i, ctx)``: a single op or a graph
of up to four statements drawn from the target's rule set, with random shapes and layouts.
A valid case is synthesized, lowered, compiled and compared with NumPy, as
``python -m morello --target T FILE --check`` does (the same inputs, seed 0); an invalid one
(about a tenth) must be rejected by the check pass with a SpecError at the expected
``path:line:col``. Each worker process has its own context and in-memory memo table, shared by
the cases it runs. With ``--memo table``, each worker also fills a memo table file (the
spatially compressed SQLite table the CLI uses, in the build folder) from case to case: every
valid case is synthesized first with the in-memory memo, whose cost is the reference, then with
the file's table, whose program is the one checked, and the two costs must be equal (a
``cost differs`` wrong case otherwise). Every 20th case the table is flushed and its answers in
memory dropped, so that later cases read them back from the file, and every 100th it is closed
and opened again. ``--walks N`` synthesizes with the file's table in N walks (the search's
helper walks, ``--jobs`` of the CLI), which a pool's worker cannot start, so it needs
``--jobs 1``. Valid cases for which ``--check``'s tolerance is too tight are drawn again
(see ``morello.fuzzing``; ``--probe`` is how many roundings the inputs move in that test, 0
for none). A wrong case is labelled ``gross``, or ``rounding-size`` when it is off by at
most 64 roundoffs, where the tolerance rather than the code may be at fault.

Prints a progress line now and then and a summary; writes every failing case to the
``--keep`` folder, where ``python -m morello --target T FILE --check`` re-runs it (the
outcome is appended as comments). Exits 1 if any case was wrong, crashed or was not
rejected as expected, 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import multiprocessing
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from morello.context import SynthesisContext, make_context
from morello.db.sqlite import open_table
from morello.db.table import MemoTable
from morello.errors import CheckFailed, MorelloError
from morello.fuzzing import (
    FuzzCase,
    FuzzOptions,
    case_for_seed,
    check_case,
    program_of,
    rejection_problem,
)
from morello.search.solve import synthesize

PASSED, WRONG, ERROR, REJECTED, MISREJECTED = (
    "passed",
    "wrong",
    "error",
    "rejected",
    "not rejected as expected",
)


@attrs.frozen
class Outcome:
    """What happened to one case."""

    index: int
    name: str
    text: str
    status: str
    kind: str = ""  # the exception's class for an error
    detail: str = ""
    seconds: float = 0.0
    synth_seconds: float = 0.0
    features: frozenset[str] = frozenset()
    valid: bool = True


@attrs.frozen
class _Job:
    """What every worker needs to know (picklable)."""

    target: str
    seed: int
    options: FuzzOptions
    workroot: Path
    timeout: int
    memo_limit: int
    table: bool = False  # also fill a memo table file and compare costs (``--memo table``)
    walks: int = 1  # walks of each synthesis with the file's table (``--walks``)


#: Cases between two releases of a worker's memo table file (its answers read back from the
#: file from then on), and between two reopenings of the file.
RELEASE_EVERY, REOPEN_EVERY = 20, 100


class _Timeout(Exception):
    """A case ran past ``--timeout``."""


class _Worker:
    """One process's context and memo table; runs cases by index."""

    def __init__(self, job: _Job) -> None:
        self.job = job
        self.ctx: SynthesisContext = make_context(job.target)
        self.memo: dict[Any, Any] = {}
        self.table: MemoTable | None = None
        self.tables = 0  # new files opened so far (names them)
        self.cases = 0  # valid cases run through a table (times releases and reopenings)
        if job.table:
            self._open_table(fresh=True)

    def _open_table(self, *, fresh: bool) -> None:
        if self.table is not None:
            self.table.close()
        if fresh:
            self.tables += 1
        path = self.job.workroot / f"memo-{os.getpid()}-{self.tables}.db"
        self.table = open_table(path, self.ctx)

    def _turn_table(self) -> None:
        """Release or reopen the file's table now and then (``RELEASE_EVERY``)."""
        assert self.table is not None
        self.cases += 1
        if self.cases % REOPEN_EVERY == 0:
            self._open_table(fresh=False)
        elif self.cases % RELEASE_EVERY == 0:
            self.table.release()

    def run(self, index: int) -> Outcome:
        if len(self.memo) > self.job.memo_limit:
            self.memo.clear()  # answers are shared to save time; memory matters more
            if self.table is not None:
                self._open_table(fresh=True)
        start = time.perf_counter()
        try:
            case = case_for_seed(self.job.seed, index, self.ctx, self.job.options)
        except Exception as exc:  # a bug of the generator is a finding too
            name, kind = f"fuzz_{self.job.seed}_{index}", f"generator {type(exc).__name__}"
            return Outcome(index, name, "", ERROR, kind, traceback.format_exc())
        if not case.valid:
            problem = rejection_problem(case, self.ctx)
            status = REJECTED if problem is None else MISREJECTED
            return self._outcome(index, case, start, status, detail=problem or "")
        workdir = self.job.workroot / case.name
        try:
            traded: frozenset[str] = frozenset()
            with _alarm(self.job.timeout):
                if self.table is None:
                    synth = check_case(case, self.ctx, self.memo, workdir).seconds
                else:
                    want, _ = synthesize(program_of(case, self.ctx).spec, self.ctx, self.memo)
                    got = check_case(case, self.ctx, self.table, workdir, self.job.walks)
                    synth = got.seconds
                    traded = frozenset({"walks-traded"} if got.taken_in else ())
                    self._turn_table()
                    if got.cost != want.cost:
                        detail = (
                            f"the memo table file's program costs {got.cost}, "
                            f"a search with the in-memory memo found {want.cost}"
                        )
                        return self._outcome(index, case, start, WRONG, "cost differs", detail)
        except CheckFailed as exc:
            notes = getattr(exc, "__notes__", [])
            size = notes[0].split(":")[0] if notes else "?"
            detail = "\n".join([exc.headline(), *notes])
            return self._outcome(index, case, start, WRONG, f"CheckFailed, {size}", detail)
        except MorelloError as exc:
            return self._outcome(index, case, start, ERROR, type(exc).__name__, exc.headline())
        except _Timeout:
            self.memo.clear()  # a search cut short may have left it half-written
            if self.table is not None:
                self.table = None  # the alarm may have cut a write short: a new file
                self._open_table(fresh=True)
            detail = f"ran past {self.job.timeout} s"
            return self._outcome(index, case, start, ERROR, "timeout", detail)
        except Exception as exc:
            detail = traceback.format_exc()
            return self._outcome(index, case, start, ERROR, type(exc).__name__, detail)
        shutil.rmtree(workdir, ignore_errors=True)
        return self._outcome(index, case, start, PASSED, synth=synth, features=traded)

    def _outcome(
        self,
        index: int,
        case: FuzzCase,
        start: float,
        status: str,
        kind: str = "",
        detail: str = "",
        synth: float = 0.0,
        features: frozenset[str] = frozenset(),
    ) -> Outcome:
        """``features``: of the run, beside the case's own (coverage)."""
        seconds = time.perf_counter() - start
        return Outcome(
            index, case.name, case.text, status, kind, detail, seconds, synth,
            case.features | features, case.valid,
        )  # fmt: skip


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """Raise _Timeout in this (worker) process after ``seconds``; 0 for no limit."""

    def ring(signum: int, frame: object) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


_worker: _Worker | None = None  # the pool process's own worker (set by _start_worker)


def _start_worker(job: _Job) -> None:
    global _worker
    _worker = _Worker(job)


def _run_in_worker(index: int) -> Outcome:
    assert _worker is not None
    return _worker.run(index)


def _outcomes(job: _Job, count: int, jobs: int) -> Iterator[Outcome]:
    if jobs <= 1:
        worker = _Worker(job)
        yield from map(worker.run, range(count))
        return
    with multiprocessing.Pool(jobs, initializer=_start_worker, initargs=(job,)) as pool:
        yield from pool.imap_unordered(_run_in_worker, range(count), chunksize=1)


# ---- reporting ------------------------------------------------------------------------------


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


class _Tally:
    """Counts outcomes, prints progress, keeps failing cases."""

    def __init__(self, count: int, keep: Path, target: str) -> None:
        self.count = count
        self.keep = keep
        self.target = target
        self.start = time.perf_counter()
        self.last_print = self.start
        self.outcomes: list[Outcome] = []
        self.status: collections.Counter[str] = collections.Counter()
        self.kinds: dict[str, collections.Counter[str]] = {
            WRONG: collections.Counter(),
            ERROR: collections.Counter(),
        }
        self.features: collections.Counter[str] = collections.Counter()
        self.kept: list[Path] = []

    def add(self, o: Outcome) -> None:
        self.outcomes.append(o)
        self.status[o.status] += 1
        self.features.update(o.features)
        if o.status in self.kinds:
            self.kinds[o.status][o.kind] += 1
        if o.status in (WRONG, ERROR, MISREJECTED):
            self._keep(o)
            lines = o.detail.strip().splitlines()
            first = (lines[0] if o.status == WRONG else lines[-1]) if lines else ""
            print(f"  {o.status.upper()} {o.name} ({o.kind or o.status}): {first}", flush=True)
        now = time.perf_counter()
        done = len(self.outcomes)
        if now - self.last_print >= 30 or done == self.count:
            self.last_print = now
            print(
                f"[{done:>5}/{self.count}] {_minutes(now - self.start)} {self._line()}", flush=True
            )

    def _line(self) -> str:
        s = self.status
        return (
            f"passed {s[PASSED]}, wrong {s[WRONG]}, errors {s[ERROR]}, "
            f"invalid rejected {s[REJECTED]}/{s[REJECTED] + s[MISREJECTED]}"
        )

    def _keep(self, o: Outcome) -> None:
        self.keep.mkdir(parents=True, exist_ok=True)
        path = self.keep / f"{o.name}.lark"
        notes = "".join(f"# {line}\n" for line in o.detail.strip().splitlines())
        head = f"# fuzz: {o.status} ({o.kind})\n" if o.kind else f"# fuzz: {o.status}\n"
        path.write_text(o.text + head + notes, encoding="utf-8")
        self.kept.append(path)

    def failed(self) -> bool:
        return bool(self.status[WRONG] or self.status[ERROR] or self.status[MISREJECTED])

    def summary(self) -> None:
        wall = time.perf_counter() - self.start
        s = self.status
        valid = [o for o in self.outcomes if o.valid]
        print()
        print(f"valid cases run      {len(valid)}")
        print(f"  passed             {s[PASSED]}")
        for status in (WRONG, ERROR):
            kinds = ", ".join(f"{k} {n}" for k, n in self.kinds[status].most_common())
            label = "errors" if status == ERROR else status
            print(f"  {label:<18} {s[status]}" + (f" ({kinds})" if kinds else ""))
        print(f"invalid cases        {s[REJECTED] + s[MISREJECTED]}")
        print(f"  rejected as expected {s[REJECTED]}, not as expected {s[MISREJECTED]}")
        print(f"time                 {_minutes(wall)} wall")
        synth = [o.synth_seconds for o in valid if o.status == PASSED]
        if synth:
            slow = max(valid, key=lambda o: o.seconds)
            print(
                f"  synthesis per case median {statistics.median(synth):.2f} s, "
                f"mean {statistics.mean(synth):.2f} s; slowest case {slow.name} "
                f"{slow.seconds:.1f} s"
            )
        cover = ", ".join(f"{k} {n}" for k, n in sorted(self.features.items()))
        print(f"coverage             {cover}")
        if self.kept:
            print(f"failing cases kept in {self.keep}; re-run one with")
            for path in sorted(self.kept):
                print(f"  python -m morello --target {self.target} {path} --check")


_DEFAULTS = FuzzOptions()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--count", type=int, required=True, help="how many cases to run")
    ap.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    ap.add_argument("--target", default="zen1", help="target to synthesize for (default zen1)")
    ap.add_argument(
        "--max-extent",
        type=int,
        default=_DEFAULTS.max_extent,
        help="largest usual extent (default %(default)s); one extent in 30 may be up to 5/3 "
        f"of it ({_DEFAULTS.large_extent} for {_DEFAULTS.max_extent})",
    )
    ap.add_argument(
        "--probe",
        type=float,
        default=_DEFAULTS.probe_roundings,
        help="redraw cases whose reference moves past the tolerance when the inputs move by "
        "this many roundings (default %(default)s; 0: no such test)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--keep", type=Path, help="folder for failing cases (default: a new tmp dir)")
    ap.add_argument(
        "--timeout", type=int, default=600, help="seconds one case may take (default 600)"
    )
    ap.add_argument(
        "--memo",
        choices=("dict", "table"),
        default="dict",
        help="dict: each worker's memo is in memory only (default); table: also a memo table "
        "file, whose programs are checked and whose costs must equal the in-memory memo's",
    )
    ap.add_argument(
        "--walks",
        type=int,
        default=1,
        help="with --memo table: walks of each synthesis with the file (helper walks; "
        "needs --jobs 1; default %(default)s)",
    )
    ap.add_argument(
        "--memo-limit",
        type=int,
        default=2_000_000,
        help="Specs a worker's memo table may hold before it is emptied (default %(default)s)",
    )
    args = ap.parse_args(argv)
    if args.count < 1 or args.jobs < 1 or args.max_extent < 2:
        ap.error("--count and --jobs must be at least 1, --max-extent at least 2")
    if args.walks != 1 and (args.walks < 1 or args.memo != "table" or args.jobs != 1):
        ap.error("--walks needs --memo table and --jobs 1 (a pool's worker starts no walks)")
    keep = args.keep or Path(tempfile.mkdtemp(prefix="morello-fuzz-"))
    options = FuzzOptions(
        max_extent=args.max_extent,
        large_extent=args.max_extent * 5 // 3,
        probe_roundings=args.probe,
    )
    workroot = Path(tempfile.mkdtemp(prefix="morello-fuzz-build-"))
    job = _Job(
        args.target, args.seed, options, workroot, args.timeout, args.memo_limit,
        args.memo == "table", args.walks,
    )  # fmt: skip
    print(
        f"fuzz: {args.count} cases, seed {args.seed}, target {args.target}, "
        f"max extent {args.max_extent}, {args.jobs} jobs, memo {args.memo}"
        f"{f', {args.walks} walks' if args.walks > 1 else ''} "
        f"({platform.processor() or platform.machine()}, python {platform.python_version()})",
        flush=True,
    )
    tally = _Tally(args.count, keep, args.target)
    for outcome in _outcomes(job, args.count, args.jobs):
        tally.add(outcome)
    tally.summary()
    if not tally.failed():
        shutil.rmtree(workroot, ignore_errors=True)
    return 1 if tally.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
