"""Parallel loops: offered only where a Spec may run in parallel, priced per thread, optimal
by the exhaustive oracle, and kept apart in the memo table by thread count."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from morello.context import SynthesisContext
from morello.db.coords import spec_to_coords
from morello.db.sqlite import open_table
from morello.db.table import MISSING, MemoTable
from morello.errors import TargetError
from morello.nodes import LoopAction, ParallelLoopAction
from morello.search.exhaustive import exhaustive_search, impl_problems
from morello.search.expand import past_forced, spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec


def threaded(ctx: SynthesisContext, threads: int, fork_join: int | None = None) -> SynthesisContext:
    """``ctx`` allowing ``threads`` threads (and, if given, another fork/join cost)."""
    if ctx.target.processors < threads:
        pytest.skip(f"target {ctx.target.name} has {ctx.target.processors} processors")
    coeffs = ctx.coefficients
    if fork_join is not None:
        coeffs = attrs.evolve(coeffs, fork_join=fork_join)
    return attrs.evolve(ctx, threads=threads, coefficients=coeffs)


def parallel(spec: Spec) -> Spec:
    return attrs.evolve(spec, serial=False)


def parallel_loops(spec: Spec, ctx: SynthesisContext) -> list[ParallelLoopAction]:
    return [a for a in spec_actions(spec, ctx) if isinstance(a, ParallelLoopAction)]


def test_threads_default_to_the_targets_processors_and_are_bounded(ctx: SynthesisContext) -> None:
    assert ctx.threads == ctx.target.processors
    if ctx.target.processors < 2:
        pytest.skip(f"target {ctx.target.name} has one processor")
    with pytest.raises(TargetError, match=r"--threads must be from 1 to the \d+ processors"):
        attrs.evolve(ctx, threads=ctx.target.processors + 1)
    with pytest.raises(TargetError, match="found 0"):
        attrs.evolve(ctx, threads=0)


def test_parallel_loops_only_where_a_spec_may_run_in_parallel(
    ctx: SynthesisContext, matmul_spec
) -> None:
    ctx2 = threaded(ctx, 2)
    spec = past_forced(matmul_spec(4, 2, 3), ctx)  # (past a residency in an L2, if any)
    assert parallel_loops(spec, ctx2) == []  # serial
    assert parallel_loops(parallel(spec), threaded(ctx, 1)) == []  # one thread
    loops = parallel_loops(parallel(spec), ctx2)
    # Output indices only (m, n: never the reduction k), two trips or more.
    assert [(a.var, a.step, a.trips) for a in loops] == [("m", 1, 4), ("m", 2, 2), ("n", 1, 3)]
    for a in loops:
        assert a.body.serial
        assert a.tail is None or a.tail.serial
        # Each running body gets its share of the shared first level, unless that level
        # bounds each buffer on its own.
        share = 1 if ctx.target.levels[0].per_buffer else 2
        assert a.body.limits[0] == spec.limits[0] // share
        assert a.body.limits[1:] == spec.limits[1:]


def test_below_a_move_into_a_per_core_level_code_is_serial(
    ctx: SynthesisContext, matmul_spec
) -> None:
    ctx2 = threaded(ctx, 2)
    spec = parallel(matmul_spec(4, 2, 4))
    first = ctx.target.levels[0]
    for action in spec_actions(spec, ctx2):
        for child in action.children:
            # (residency in an L2 that holds whole Specs keeps the buffers in main memory)
            if any(t.level != first and not t.level.whole_specs for t in child.operands):
                assert child.serial, action.describe()


def test_a_parallel_loop_prices_the_busiest_thread_and_the_fork_join(
    ctx: SynthesisContext, matmul_spec
) -> None:
    ctx3 = threaded(ctx, 3, fork_join=1000)
    spec = parallel(past_forced(matmul_spec(5, 1, 1), ctx))
    (loop,) = [a for a in parallel_loops(spec, ctx3) if a.step == 1]
    assert (loop.trips, loop.workers, loop.trips_per_thread) == (5, 3, 2)
    serial = LoopAction(loop.rule, loop.var, 1, 2, loop.body, None)
    assert loop.cost(spec, [100], ctx3) == serial.cost(spec, [100], ctx3) + 1000
    assert "parallel for m in 5 x 1 on 3 threads" in loop.describe()
    # Per-core levels as the body needs them; the first level's buffers add up per thread
    # (unless it bounds each buffer on its own).
    body_peaks = (8, *(2 for _ in ctx.target.levels[1:]))
    peaks = loop.peaks(spec, [body_peaks], ctx3)
    assert peaks[0] == (8 if ctx.target.levels[0].per_buffer else 32)  # 3 x 8, rounded up
    assert peaks[1:] == body_peaks[1:]


@pytest.mark.target("zen1")  # its fork/join cost keeps these sizes on one thread
@pytest.mark.parametrize("fork_join", [0, None])
@pytest.mark.parametrize(("m", "k", "n"), [(2, 1, 1), (2, 2, 2), (4, 1, 2), (3, 2, 4), (2, 1, 8)])
def test_dp_is_optimal_on_parallel_specs(
    ctx: SynthesisContext, matmul_spec, m: int, k: int, n: int, fork_join: int | None
) -> None:
    """The DP's cost equals the exhaustive oracle's; free fork/joins make it go parallel."""
    c = threaded(ctx, 2, fork_join)
    spec = parallel(matmul_spec(m, k, n))
    impl, _ = synthesize(spec, c, {})
    assert impl_problems(impl, c) == []
    best = exhaustive_search(spec, c, max_trees=20_000)
    assert impl.cost == best.cost, f"oracle by {best.method} of {best.trees} trees"
    uses = any(isinstance(node.action, ParallelLoopAction) for node in impl.walk())
    assert uses == (impl.threads() == 2)
    serial_cost = synthesize(matmul_spec(m, k, n), c, {})[0].cost
    if fork_join == 0:
        assert impl.cost <= serial_cost
        assert uses == (impl.cost < serial_cost)
    else:
        # At these sizes the target's fork/join costs more than a second thread saves.
        assert not uses
        assert impl.cost == serial_cost


@pytest.mark.target("zen1")
def test_a_parallel_loop_is_chosen_where_it_pays(ctx: SynthesisContext, matmul_spec) -> None:
    c = threaded(ctx, 2, fork_join=0)
    impl, _ = synthesize(parallel(matmul_spec(8, 2, 8)), c, {})
    assert impl.action.describe() == "parallel_tile_out: parallel for m in 2 x 4 on 2 threads"
    assert impl.threads() == 2
    assert impl.cost < synthesize(matmul_spec(8, 2, 8), c, {})[0].cost


def test_memo_table_keeps_thread_counts_apart(
    ctx: SynthesisContext, matmul_spec, tmp_path: Path
) -> None:
    """Answers for a parallel Spec found with 2 threads are never read back with 4; answers
    for serial Specs are shared by every thread count."""
    ctx2, ctx4 = threaded(ctx, 2, 0), threaded(ctx, 4, 0)
    spec = parallel(matmul_spec(4, 2, 8))
    assert spec_to_coords(spec, ctx2)[0] != spec_to_coords(spec, ctx4)[0]
    serial = matmul_spec(4, 2, 8)
    assert spec_to_coords(serial, ctx2) == spec_to_coords(serial, ctx4)

    path = tmp_path / "memo.sqlite3"
    table2 = open_table(path, ctx2)
    impl2, _ = synthesize(spec, ctx2, table2)
    synthesize(serial, ctx2, table2)
    table2.close()
    assert "on 2 threads" in impl2.past_forced().action.describe()

    table4 = open_table(path, ctx4)
    assert table4.get(spec) is MISSING
    assert table4.get(serial) is not MISSING
    warm4, _ = synthesize(spec, ctx4, table4)
    table4.close()
    cold4, _ = synthesize(spec, ctx4, MemoTable(ctx4))
    assert warm4 == cold4
    assert "on 4 threads" in warm4.past_forced().action.describe()
    assert warm4.cost < impl2.cost

    # And the 2-thread answer is still there, replayed as it was found.
    table2 = open_table(path, ctx2)
    again, stats = synthesize(spec, ctx2, table2)
    table2.close()
    assert again == impl2
    assert stats.specs_visited == 0
