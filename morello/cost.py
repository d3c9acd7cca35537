"""The affine cost model: the cost and peak memory of one Impl node from its children's.

Each node kind states its own cost rule (``morello.nodes``): loops cost their trip count
times their body (plus the tail once, the latency of the dependency chains a reduction loop
over register accumulators makes, and the streams a loop across runs starts again); blocks
the sum of their stages; a kernel its declared expression plus the lines its operands touch;
a move into a cache the lines it touches at both levels, a move into a new buffer its
prologue and epilogue, whose kernels already pay for every access (charging the move too
would count each access twice, which made small register tiles look dear). This module holds
what they share: the price of the lines a tile touches. Coefficients come from the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from morello.spec import Spec, TensorSpec
from morello.spec import lines_and_runs as spec_geometry

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Action


def access_cost(ts: TensorSpec, ctx: SynthesisContext) -> int:
    """The lines ``ts`` touches times their cost at its level.

    A line costs the level's hit coefficient, twice that if the tile is not contiguous, or
    the target's price for the tile's number of contiguous runs read as concurrent streams
    when the runs are long enough for prefetchers to follow (``CostCoefficients.stream_hit``).
    """
    coeffs = ctx.coefficients
    level = ts.level.name
    if coeffs.level_hit[level] == 0:
        return 0
    lines, runs = lines_and_runs(ts)
    return lines * coeffs.line_cost(level, runs, lines // runs)


def lines_and_runs(ts: TensorSpec) -> tuple[int, int]:
    """Cache lines ``ts`` touches at its level, and its number of contiguous runs."""
    return spec_geometry(ts, ts.dtype.size, ts.level.line_bytes)


def action_cost(
    spec: Spec, action: Action, child_costs: Sequence[int], ctx: SynthesisContext
) -> int:
    """Cost of ``action`` applied to ``spec`` given its children's costs (in child order)."""
    return action.cost(spec, child_costs, ctx)


def action_peaks(
    spec: Spec,
    action: Action,
    child_peaks: Sequence[tuple[int, ...]],
    ctx: SynthesisContext,
) -> tuple[int, ...]:
    """The least memory limits (per level, in limit units) under which this Impl is chosen.

    This is the peak memory rounded the way limits are (see ``MoveAction.peaks``). Since a
    solution stays optimal for every limit between these requirements and the limits it was
    found under, the memo table stores it for that range.
    """
    return action.peaks(spec, child_peaks, ctx)
