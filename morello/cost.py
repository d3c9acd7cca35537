"""The affine cost model: the cost and peak memory of one Impl node from its children's.

Each node kind states its own cost rule (``morello.nodes``): loops cost their trip count
times their body (plus the tail once, the latency of the dependency chains a reduction loop
over register accumulators makes, and the streams a loop across runs starts again or walks
in strided pieces, less the reads an unrolled loop's repeats share with its first trip);
blocks the sum of their stages; a kernel its declared expression plus
the lines its operands touch; a move into a cache the lines it touches at both levels, a
move into a new buffer its prologue and epilogue, whose kernels already pay for every
access (charging the move too would count each access twice, which made small register
tiles look dear). This module holds what they share: the price of the lines a tile
touches. Coefficients come from the target.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from morello.spec import Spec, TensorSpec
from morello.spec import lines_and_runs as spec_geometry

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Action
    from morello.rules.kernels import Kernel
    from morello.target import CostCoefficients


class Cost(int):
    """A cost whose value is ``base + max(use)``: a part no execution resource overlaps and
    the use of each resource the target declares (``CostCoefficients.resources``, in order).

    Arithmetic on it gives plain ints (its value), which is how a node outside a register
    tile adds its children; ``combine`` adds them resource by resource where they overlap.
    """

    base: int
    use: tuple[int, ...]

    def __new__(cls, base: int, use: tuple[int, ...]) -> Cost:
        self = super().__new__(cls, base + max(use, default=0))
        self.base = base
        self.use = use
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Cost, (self.base, self.use))

    def __repr__(self) -> str:
        return f"Cost({self.base}, {self.use})"

    def __str__(self) -> str:
        """The value and how it arises: ``195 = 3 + max(192, 120, 0)``."""
        return f"{int(self)} = {self.base} + max({', '.join(map(str, self.use))})"


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


def kernel_cost(
    kernel: Kernel, bindings: Mapping[str, int], spec: Spec, ctx: SynthesisContext
) -> int:
    """A kernel's declared cost plus the lines its operands touch at their levels.

    With ``resources``, each term of the declared cost whose coefficient a resource names is
    priced by that resource's weight instead (``use``), and so are the lines of an operand
    at a level a resource names (lines times weight); the rest is ``base``.
    """
    coeffs = ctx.coefficients
    lines = operand_lines(spec.operands, ctx)
    if not isinstance(lines, Cost):
        return kernel.main_cost(bindings, coeffs.named) + lines
    base_named, weights, _ = _resource_prices(coeffs)
    use = [kernel.main_cost(bindings, w) + u for w, u in zip(weights, lines.use, strict=True)]
    return Cost(kernel.main_cost(bindings, base_named) + lines.base, tuple(use))


def operand_lines(tensors: Sequence[TensorSpec], ctx: SynthesisContext) -> int:
    """The lines ``tensors`` touch at their levels, priced as a kernel prices its operands':
    resource by resource for the levels a resource names (a ``Cost``) where the target
    declares resources, else by value (``access_cost``)."""
    coeffs = ctx.coefficients
    if not coeffs.resources:
        return sum(access_cost(ts, ctx) for ts in tensors)
    levels = _resource_prices(coeffs)[2]
    base, use = 0, [0] * len(coeffs.resources)
    for ts in tensors:
        by_resource = levels.get(ts.level.name)
        if by_resource is None:
            base += access_cost(ts, ctx)
            continue
        lines = lines_and_runs(ts)[0]
        for i, weight in by_resource:
            use[i] += lines * weight
    return Cost(base, tuple(use))


def less_accesses(
    total: int, tiles: Sequence[tuple[int, TensorSpec]], ctx: SynthesisContext
) -> int:
    """``total`` less ``times`` accesses of each tile in ``tiles`` (``(times, tile)`` pairs):
    resource by resource where ``total`` is a ``Cost`` (the tiles' lines at a level that a
    resource names come off that resource's use, as ``kernel_cost`` put them there), else by
    value."""
    if not isinstance(total, Cost):
        return total - sum(times * access_cost(ts, ctx) for times, ts in tiles)
    base, use = total.base, list(total.use)
    levels = _resource_prices(ctx.coefficients)[2]
    for times, ts in tiles:
        by_resource = levels.get(ts.level.name)
        if by_resource is None:
            base -= times * access_cost(ts, ctx)
            continue
        lines = lines_and_runs(ts)[0]
        for i, weight in by_resource:
            use[i] -= times * lines * weight
    return Cost(base, tuple(use))


@functools.lru_cache(maxsize=16)
def _resource_prices(
    coeffs: CostCoefficients,
) -> tuple[dict[str, int], list[dict[str, int]], dict[str, list[tuple[int, int]]]]:
    """For ``resources``: the named coefficients with those a resource prices set to 0; each
    resource's weights by coefficient name (0 for the rest); its weights by level name."""
    priced = {term for weights in coeffs.resources.values() for term in weights}
    base = {name: 0 if name in priced else v for name, v in coeffs.named.items()}
    weights = [{name: w.get(name, 0) for name in coeffs.named} for w in coeffs.resources.values()]
    levels: dict[str, list[tuple[int, int]]] = {}
    for i, w in enumerate(coeffs.resources.values()):
        for term, weight in w.items():
            if term in coeffs.level_hit:
                levels.setdefault(term, []).append((i, weight))
    return base, weights, levels


def work(cost: int) -> int:
    """All the work a cost stands for, every resource's use added up: what breaks a tie
    between two Impls of one value (the one with less leaves more room beside its siblings
    under the same bound). A plain int is its own work."""
    if isinstance(cost, Cost):
        return cost.base + sum(cost.use)
    return cost


def combine(
    spec: Spec,
    costs: Sequence[int],
    extra: int,
    ctx: SynthesisContext,
    counts: Sequence[int] | None = None,
) -> int:
    """``extra`` plus the sum of ``costs`` (each times its entry of ``counts``, if given):
    resource by resource when ``spec`` computes into registers and the target declares
    resources (see the module's note), else by value."""
    if not ctx.coefficients.resources or not spec.operands[-1].level.counts_registers:
        if counts is None:
            return sum(costs) + extra
        return sum(map(operator.mul, counts, costs)) + extra
    base = extra
    use = [0] * len(ctx.coefficients.resources)
    for n, c in zip(counts or (1,) * len(costs), costs, strict=True):
        if isinstance(c, Cost):
            base += n * c.base
            for i, u in enumerate(c.use):
                use[i] += n * u
        else:
            base += n * c
    return Cost(base, tuple(use))


def iteration_points(spec: Spec, ctx: SynthesisContext) -> int:
    """The size of ``spec``'s iteration space: the points its op visits, one per combination
    of its index values (an operand with as many elements is read once)."""
    sizes = ctx.ruleset.ops[spec.op].sizes([t.shape for t in spec.operands])
    assert isinstance(sizes, dict)
    return functools.reduce(operator.mul, sizes.values(), 1)


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
