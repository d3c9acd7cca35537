"""Precompute: solve every Spec of an op up to a size bound into the memo table, on Dask.

The goals are the op's root Specs (operands in the target's slowest memory, the full memory
limits, serial), one for every combination of

* sizes: each index variable takes every size up to the bound that a size policy of the
  rule set names (the sizes tiles are made of: 1, 2, 3, 4, 6, 8, ... for ``pow2_3``);
* layouts: every unparameterized layout family a spec file may name (row-major and
  column-major) for each operand of rank 2 or more;
* dtypes: every assignment of the given dtypes to the operands that some kernel or
  decomposition of the target implements.

Solving a root solves everything below it (tiles, moves into faster levels with new layouts,
lower memory limits), so afterwards any spec file whose function applies the op at such
sizes is answered from the table with no Spec expanded.

The goals are split into *stages* by size (the sum of the sizes' positions on the lattice),
smaller first, so most of what a stage needs was solved by earlier ones; a stage's goals are
grouped into tasks by shape (all layouts and dtypes of one shape share most sub-problems).
Workers (a ``distributed.LocalCluster`` by default, or the cluster at ``--scheduler``) read
the table file, solve their task in memory and send back the boxes they found; this process
is the one writer: it merges them into the file, one short transaction every few seconds.
With the boxes, a worker sends the Specs it solved with their costs; the writer passes each
such batch on to the other workers through the file at once (``MemoTable.publish`` and
``refresh``). A worker so keeps its copy of the table up to date without reading back the
keys the writer rewrote, and knows the other workers' solutions with their costs: a stored
decision alone would have to be resolved again, walking its subtree, and with two workers
most of what one needs the other solved. A goal already answered by the table is not
submitted again, so an interrupted run resumes where it stopped; a lock file keeps two
precomputes from filling one file at once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import itertools
import math
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from morello.db.table import MISSING
from morello.dtypes import DTYPES
from morello.errors import MemoTableError, MorelloError, NoImplementationError, SpecError
from morello.layout import LAYOUT_FAMILIES
from morello.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.db.table import MemoTable


@attrs.frozen
class Task:
    """Goals of one shape, solved together by one worker."""

    stage: int
    shape: tuple[int, ...]
    goals: tuple[Spec, ...]


@attrs.frozen
class Report:
    """What a precompute did."""

    goals: int  # root Specs within the bounds
    already: int  # answered by the table before the run
    solved_goals: int  # solved by this run
    no_implementation: int  # goals with no implementation (stored as such)
    specs_solved: int  # Specs whose actions were compared, all tasks together
    stages: int
    workers: int
    seconds: float


def size_lattice(ctx: SynthesisContext, bound: int) -> list[int]:
    """Every size up to ``bound`` that a size policy of the rule set names, and ``bound``."""
    sizes = {bound}
    for rule in ctx.ruleset.rules:
        policy = getattr(rule, "sizes", None)
        if isinstance(policy, str) and policy in ctx.size_policies:
            sizes.update(ctx.size_policies[policy](bound + 1))
    return sorted(s for s in sizes if 1 <= s <= bound)


def resolve_op(ctx: SynthesisContext, name: str) -> str:
    """The rule set's key of op ``name`` (an overload key, or a name with one overload)."""
    ops = ctx.ruleset.ops
    if name in ops:
        return name
    matches = [k for k in ops if k.split("/")[0] == name]
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(sorted({k.split("/")[0] for k in ops}))
    if not matches:
        raise SpecError(f"unknown op {name!r} (the rule set has: {known})")
    raise SpecError(f"op {name!r} has overloads {', '.join(matches)}: name one of them")


def root_goals(
    ctx: SynthesisContext, op: str, bound: int, dtypes: Sequence[str]
) -> list[tuple[tuple[int, ...], Spec]]:
    """Every root Spec of ``op`` within the bounds, with its shape (index sizes, in the op's
    index order)."""
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise SpecError(f"unknown dtype {unknown[0]!r} (known: {', '.join(DTYPES)})")
    opdef = ctx.ruleset.ops[op]
    nops = len(opdef.operands)
    combos = [c for c in itertools.product(dtypes, repeat=nops) if ctx.ruleset.implementable(op, c)]
    if not combos:
        raise SpecError(
            f"no kernel or decomposition of target {ctx.target.name} implements {op} "
            f"with dtypes from {', '.join(dtypes)}"
        )
    lattice = size_lattice(ctx, bound)
    level = ctx.target.levels[0]
    limits = ctx.target.max_limits()
    out = []
    for shape in itertools.product(lattice, repeat=len(opdef.index_vars)):
        sizes = dict(zip(opdef.index_vars, shape, strict=True))
        shapes = [opdef.operand_shape(i, sizes) for i in range(nops)]
        choices = [_layouts(s) for s in shapes]
        for dts in combos:
            for lays in itertools.product(*choices):
                tensors = tuple(
                    TensorSpec(s, DTYPES[d], level, lay)
                    for s, d, lay in zip(shapes, dts, lays, strict=True)
                )
                out.append((shape, Spec(op, tensors, False, limits, True)))
    return out


def _layouts(shape: tuple[int, ...]) -> list[Any]:
    seen = []
    for ctor in LAYOUT_FAMILIES.values():
        canon = ctor(len(shape)).canonical(shape)
        if canon is not None and canon not in seen:
            seen.append(canon)
    return seen


def plan(goals: list[tuple[tuple[int, ...], Spec]], lattice: list[int]) -> list[list[Task]]:
    """Stages of tasks: by the sum of the sizes' lattice positions, smaller first; within
    a stage, one task per shape, larger shapes first (so the longest start first)."""
    pos = {s: i for i, s in enumerate(lattice)}
    by_shape: dict[tuple[int, ...], list[Spec]] = {}
    for shape, spec in goals:
        by_shape.setdefault(shape, []).append(spec)
    stages: dict[int, list[Task]] = {}
    for shape, specs in by_shape.items():
        stage = sum(pos[s] for s in shape)
        stages.setdefault(stage, []).append(Task(stage, shape, tuple(specs)))
    out = []
    for stage in sorted(stages):
        tasks = stages[stage]
        tasks.sort(key=lambda t: (-math.prod(t.shape), t.shape))
        out.append(tasks)
    return out


# ---- the worker side -----------------------------------------------------------------------

_CONTEXTS: dict[tuple[Any, ...], SynthesisContext] = {}
_TABLES: dict[tuple[str, int], MemoTable] = {}
# The writer stores what it absorbed every few seconds, appending to each table's row the
# boxes added since (sqlite.py; when each flush encoded every table it changed whole, at 2 s
# the flushes took 10 s of a 77 s bound-16 run on 2 workers, on cores the workers share).
# The workers do not wait for it: they get every batch at once from ``publish``.
_FLUSH_EVERY_S = 5.0
_MAX_KEPT = 400_000  # solutions a worker keeps between tasks (a few hundred MB)
# This process as a source of shared solutions (pids may repeat across a cluster's hosts).
_SOURCE = f"{os.getpid()}-{os.urandom(8).hex()}"


def _worker_context(target: str, rules: tuple[str, ...], threads: int) -> SynthesisContext:
    """The worker process's context (built once per process)."""
    key = (target, rules, threads)
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        from morello.context import make_context

        ctx = _CONTEXTS[key] = make_context(target, None, rules, threads)
    return ctx


def solve_task(
    target: str, rules: tuple[str, ...], threads: int, db: str, goals: tuple[Spec, ...]
) -> tuple[bytes, int, int, str, int, int]:
    """Solve ``goals`` against the table at ``db`` (read only). Returns what was found as one
    batch (the boxes, and the Specs solved with their costs, for the writer and the other
    workers: ``MemoTable.collect``), the number of Specs solved and their pickled size,
    this worker's name as the batch's source, goals solved, goals with no implementation."""
    from morello.db.sqlite import open_table
    from morello.search.solve import synthesize

    ctx = _worker_context(target, rules, threads)
    # One read-only table per worker process and file, kept from task to task with the
    # solutions it resolved; the boxes and solutions other workers found are taken in from
    # the batches the writer passes on, so no key is read from the file twice.
    memo = _TABLES.get((db, id(ctx)))
    if memo is None:
        memo = _TABLES[(db, id(ctx))] = open_table(db, ctx, read_only=True)
    memo.refresh(_SOURCE, reread=False)
    solved_goals = unsat = 0
    for spec in goals:
        if memo.get(spec) is not MISSING:
            continue
        try:
            synthesize(spec, ctx, memo)
            solved_goals += 1
        except NoImplementationError:
            unsat += 1
    batch, solved, pickled = memo.collect()
    if len(memo.solutions) > _MAX_KEPT:
        memo.solutions.clear()  # bound the worker's memory; they are resolved again if needed
    return batch, solved, pickled, _SOURCE, solved_goals, unsat


def release_worker_state() -> None:
    """Let go of this worker process's tables and contexts (run on every worker at the end).

    Freed here, while the worker is idle, they cost about 0.1 s; left for the worker's
    shutdown, closing a two-worker local cluster took 2-2.5 s instead of 0.4 s, paid by
    every precompute."""
    _TABLES.clear()
    _CONTEXTS.clear()


# ---- the driver side -----------------------------------------------------------------------


@contextlib.contextmanager
def exclusive(db: Path) -> Iterator[None]:
    """Hold the precompute lock of ``db``; MemoTableError if another process holds it."""
    lock_path = Path(f"{db}.precompute-lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise MemoTableError(
                f"another precompute (pid {holder}) is filling memo table {db}; wait for it "
                "to finish or pass another --db"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def precompute(
    ctx: SynthesisContext,
    op: str,
    bound: int,
    dtypes: Sequence[str],
    db: Path,
    *,
    rules: Sequence[str] = (),
    workers: int | None = None,
    scheduler: str | None = None,
    connect_timeout: float = 30.0,
    progress: bool | None = None,
) -> Report:
    """Fill ``db`` with every Spec of ``op`` up to ``bound`` (see the module docstring).

    ``workers`` sizes the local cluster (default: this machine's cores); ``scheduler`` names
    a running Dask scheduler instead (waited for ``connect_timeout`` seconds), whose
    workers must be able to read ``db`` (a shared file system). ``progress``: a progress
    bar on stderr (None: when stderr is a terminal).
    """
    from morello.db.sqlite import SqliteStore, open_table

    start = time.perf_counter()
    op = resolve_op(ctx, op)
    if bound < 1:
        raise SpecError(f"--up-to must be 1 or more, found {bound}")
    goals = root_goals(ctx, op, bound, dtypes)
    lattice = size_lattice(ctx, bound)
    with exclusive(db):
        table = open_table(db, ctx)
        try:
            todo = [(shape, s) for shape, s in goals if table.get(s) is MISSING]
            stages = plan(todo, lattice)
            table.release()
            assert isinstance(table.store, SqliteStore)
            table.store.drop_shared()  # what an interrupted run passed between its workers
            counts = _run_stages(
                ctx, table, stages, db, tuple(rules), workers, scheduler, connect_timeout, progress
            )
            table.flush(whole=True)  # one chunk of merged boxes per row
            table.store.drop_shared()
            table.store.compact()
        finally:
            table.close()
    return Report(
        goals=len(goals),
        already=len(goals) - len(todo),
        solved_goals=counts[0],
        no_implementation=counts[1],
        specs_solved=counts[2],
        stages=len(stages),
        workers=counts[3],
        seconds=time.perf_counter() - start,
    )


def local_cluster(workers: int, attempts: int = 3) -> Any:
    """A ``distributed.LocalCluster`` of ``workers`` one-thread processes, started quietly.

    Dask gives its event loop ten seconds to start and fails with a bare ``AssertionError``
    past that, which a loaded machine can exceed; this tries ``attempts`` times, then says so
    in one line. A cluster that failed to start is collected with its "unclosed cluster"
    warning silenced: it never ran, and the warning would surface later, in unrelated code.
    """
    import distributed

    failure = ""
    for _ in range(attempts):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                return distributed.LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=50,
                )
            except (AssertionError, OSError, TimeoutError) as exc:
                failure = str(exc) or type(exc).__name__
            gc.collect()
    raise MemoTableError(
        f"could not start a local Dask cluster of {workers} worker(s) in {attempts} attempts"
        f" ({failure}); the machine may be overloaded, or pass --scheduler"
    )


def _run_stages(
    ctx: SynthesisContext,
    table: Any,
    stages: list[list[Task]],
    db: Path,
    rules: tuple[str, ...],
    workers: int | None,
    scheduler: str | None,
    connect_timeout: float,
    progress: bool | None,
) -> tuple[int, int, int, int]:
    """Submit the stages in order; merge each finished task's boxes into ``table``."""
    try:
        import distributed
    except ImportError:
        raise MorelloError(
            "precompute runs on Dask, which is not installed: pip install 'morello[cluster]'"
        ) from None
    from tqdm import tqdm

    total = sum(len(t.goals) for tasks in stages for t in tasks)
    solved_goals = unsat = specs = 0
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            n = workers or os.cpu_count() or 1
            cluster = stack.enter_context(local_cluster(n))
            client = stack.enter_context(distributed.Client(cluster))
        else:
            try:
                client = stack.enter_context(distributed.Client(scheduler, timeout=connect_timeout))
            except OSError as exc:
                raise MemoTableError(
                    f"cannot reach the Dask scheduler at {scheduler} ({exc})"
                ) from None
            except (ValueError, TypeError) as exc:  # Dask's parse of the address
                raise MemoTableError(
                    f"{scheduler!r} is not a Dask scheduler address ({exc}); expected "
                    "tcp://HOST:PORT"
                ) from None
        nworkers = len(client.scheduler_info()["workers"])
        bar = stack.enter_context(
            tqdm(
                total=total,
                unit="goal",
                desc="precompute",
                disable=None if progress is None else not progress,
                dynamic_ncols=True,
            )
        )
        t0 = time.perf_counter()
        last_flush = time.monotonic()
        for index, tasks in enumerate(stages):
            bar.set_description(f"stage {index + 1}/{len(stages)}")
            futures = [
                client.submit(
                    solve_task,
                    ctx.target.name,
                    rules,
                    ctx.threads,
                    str(db),
                    task.goals,
                    pure=False,
                )
                for task in tasks
            ]
            sizes = {f.key: len(t.goals) for f, t in zip(futures, tasks, strict=True)}
            for future in distributed.as_completed(futures):
                batch, solved, pickled, source, done, none = future.result()
                table.absorb(batch, solved, pickled, source)
                table.publish()  # to the other workers at once
                if time.monotonic() - last_flush > _FLUSH_EVERY_S:
                    table.flush()  # one short transaction every few seconds
                    last_flush = time.monotonic()
                solved_goals += done
                unsat += none
                specs += solved
                bar.update(sizes[future.key])
                rate = specs / max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix_str(f"{rate:.0f} Specs/s")
                future.release()
        client.run(release_worker_state)
    return solved_goals, unsat, specs, nworkers
