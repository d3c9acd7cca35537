"""The affine cost model: the cost and peak memory of one Impl node from its children's.

Loops cost their trip count times their body (plus the tail once, plus the latency of the
dependency chains a reduction loop over register accumulators makes, plus the streams a loop
across runs starts again); blocks the sum of their stages; a kernel its declared expression
plus the lines its operands touch (hit coefficient of their level times lines, twice for
non-contiguous data). A move into a cache costs the lines it touches at both levels; a move
into a new buffer costs its prologue and epilogue, whose kernels already pay for every
access (charging the move too would count each access twice, which made small register tiles
look dear). Coefficients come from the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from morello.context import SynthesisContext
from morello.impl import Action, BlockAction, KernelAction, LoopAction, MoveAction
from morello.spec import Spec, TensorSpec, memory_units, snap_up


def access_cost(ts: TensorSpec, ctx: SynthesisContext) -> int:
    """The lines ``ts`` touches times their cost at its level.

    A line costs the level's hit coefficient, twice that if the tile is not contiguous, or
    the target's price for the tile's number of contiguous runs read as concurrent streams
    when the runs are long enough for prefetchers to follow (``CostCoefficients.stream_hit``).
    """
    coeffs = ctx.coefficients
    if coeffs.level_hit[ts.level] == 0:
        return 0
    lines, runs = _lines_and_runs(ts, ctx)
    return lines * coeffs.line_cost(ts.level, runs, lines // runs)


def _lines_and_runs(ts: TensorSpec, ctx: SynthesisContext) -> tuple[int, int]:
    """Cache lines ``ts`` touches at its level, and its number of contiguous runs."""
    line_bytes = ctx.target.level(ts.level).line_bytes
    lines = ts.layout.cache_lines(ts.shape, ctx.dtype(ts.dtype).size, line_bytes)
    return lines, ts.layout.runs(ts.shape)


def action_cost(
    spec: Spec, action: Action, child_costs: Sequence[int], ctx: SynthesisContext
) -> int:
    """Cost of ``action`` applied to ``spec`` given its children's costs (in child order)."""
    if isinstance(action, KernelAction):
        kernel = ctx.ruleset.kernel(action.kernel)
        base = kernel.main_cost(dict(action.bindings), ctx.coefficients.named)
        return base + sum(access_cost(ts, ctx) for ts in spec.operands)
    if isinstance(action, LoopAction):
        tail = child_costs[1] if action.tail is not None else 0
        return (
            action.trips * child_costs[0]
            + tail
            + _chain_cost(spec, action, ctx)
            + _restart_cost(spec, action, ctx)
        )
    if isinstance(action, BlockAction):
        return sum(child_costs)
    assert isinstance(action, MoveAction)
    if action.new_buffer:
        # The prologue and epilogue kernels already pay for every access they make.
        return sum(child_costs)
    src = spec.operands[action.operand]
    return access_cost(src, ctx) + access_cost(action.dest, ctx) + sum(child_costs)


def _chain_cost(spec: Spec, loop: LoopAction, ctx: SynthesisContext) -> int:
    """Latency of the dependency chains a reduction loop over register accumulators makes.

    Each trip waits for the previous trip's sums; the output's registers are independent
    chains that overlap, so the wait per trip is the level's latency over their number.
    """
    out = spec.operands[-1]
    latency = ctx.coefficients.chain_latency.get(out.level, 0)
    if latency == 0 or loop.var not in ctx.ruleset.ops[spec.op].reduction_vars:
        return 0
    lv = ctx.target.level(out.level)
    chains = max(1, memory_units(out, lv, ctx.dtype(out.dtype).size))
    return -(-loop.trips * latency // chains)


def _restart_cost(spec: Spec, loop: LoopAction, ctx: SynthesisContext) -> int:
    """Streams a loop starts again: per trip, the runs of each step tile that cut across runs.

    A step that reads an operand in fewer runs than the loop's tile of it moves to other runs
    on the next trip, so every trip starts its runs anew (the prefetchers ramp up again). A
    step with as many runs continues them. Only operands that ``spec`` reads once (each
    element used by one point of its iteration space: streamed, as the weights of a matvec)
    are charged; an operand the Spec reuses is mostly served from caches, where a restart's
    latency hides. Only runs of at least ``stream_lines`` lines priced as streams count.
    """
    coeffs = ctx.coefficients
    if not coeffs.stream_restart:
        return 0
    points = None  # the size of the Spec's iteration space, computed when first needed
    total = 0
    for whole, step in zip(spec.operands, loop.body.operands, strict=True):
        restart = coeffs.stream_restart.get(step.level, 0)
        if restart == 0:
            continue
        lines, runs = _lines_and_runs(step, ctx)
        if runs >= whole.layout.runs(whole.shape) or lines // runs < coeffs.stream_lines:
            continue
        if not coeffs.streams(step.level, runs, lines // runs):
            continue
        if points is None:
            sizes = ctx.ruleset.ops[spec.op].sizes([t.shape for t in spec.operands])
            assert isinstance(sizes, dict)
            points = math.prod(sizes.values())
        if whole.volume >= points:
            total += loop.trips * runs * restart
    return total


def action_peaks(
    spec: Spec,
    action: Action,
    child_peaks: Sequence[tuple[int, ...]],
    ctx: SynthesisContext,
) -> tuple[int, ...]:
    """The least memory limits (per level, in limit units) under which this Impl is chosen.

    This is the peak memory rounded the way limits are: a move of ``u`` units over a child
    that needs ``r`` needs ``snap_up(u + r)``, because the move leaves its child
    ``snap_down(limit - u)``. Since a solution stays optimal for every limit between these
    requirements and the limits it was found under, the memo table stores it for that range.
    """
    n = len(ctx.target.levels)
    peak = [0] * n
    for cp in child_peaks:
        for i in range(n):
            peak[i] = max(peak[i], cp[i])
    if isinstance(action, KernelAction):
        for level, units in ctx.ruleset.kernel(action.kernel).scratch:
            idx = ctx.target.level_index(level)
            peak[idx] = max(peak[idx], snap_up(units))
    if isinstance(action, MoveAction):
        idx = ctx.target.level_index(action.dest.level)
        lv = ctx.target.levels[idx]
        units = memory_units(action.dest, lv, ctx.dtype(action.dest.dtype).size)
        peak[idx] = snap_up(peak[idx] + units)
    return tuple(peak)
