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
from collections.abc import Callable, Mapping, Sequence
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

    ``fills``, by operand position (empty: none), is what the value includes for bringing
    each operand's tile into a cache at the top of the tree (a residency, which writes no
    code): a loop around the tree that does not run along that operand pays it once, not
    once per trip (``loop_fills``). ``taken`` is what such a loop took off at this node.
    The value depends on neither.
    """

    base: int
    use: tuple[int, ...]
    fills: tuple[int, ...]
    taken: int

    def __new__(
        cls, base: int, use: tuple[int, ...], fills: tuple[int, ...] = (), taken: int = 0
    ) -> Cost:
        self = super().__new__(cls, base + max(use, default=0))
        self.base = base
        self.use = use
        self.fills = fills
        self.taken = taken
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Cost, (self.base, self.use, self.fills, self.taken))

    def __repr__(self) -> str:
        more = f", {self.fills}, {self.taken}" if self.fills or self.taken else ""
        return f"Cost({self.base}, {self.use}{more})"

    def __str__(self) -> str:
        """The value and how it arises: ``195 = 3 + max(192, 120, 0)``; without resources,
        the value alone."""
        if not self.use:
            return str(int(self))
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


def takes_off(cost: int) -> bool:
    """Whether a loop took residencies it repeats off ``cost`` at its node (``loop_fills``):
    a tree whose residency could stand above that loop instead, one unit cheaper (``KBest``
    orders such a tree by its cost without the credit: ``kbest.listed_cost``)."""
    return isinstance(cost, Cost) and cost.taken > 0


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


def fills(cost: int) -> tuple[int, ...]:
    """What ``cost`` includes for each operand's cache residency at the top of its tree, by
    operand position (``Cost.fills``; empty for none)."""
    return cost.fills if isinstance(cost, Cost) else ()


def with_fills(cost: int, got: Sequence[int]) -> int:
    """``cost`` with ``got`` as its fills (``Cost.fills``): a plain int where all are 0."""
    if not any(got):
        return Cost(cost.base, cost.use) if isinstance(cost, Cost) and cost.fills else cost
    if isinstance(cost, Cost):
        return Cost(cost.base, cost.use, tuple(got))
    return Cost(int(cost), (), tuple(got))


def loop_fills(
    spec: Spec,
    var: str,
    counts: Sequence[int],
    costs: Sequence[int],
    total: int,
    ctx: SynthesisContext,
    read_once: Callable[[], Sequence[int]] | None = None,
) -> int:
    """``total``, a loop's cost over index ``var`` with children costing ``costs`` run
    ``counts`` times each, less the residencies its trips after the first do not repeat,
    carrying the fills it pays once (``Cost.fills``).

    A child that starts by bringing a tile of an operand the loop does not run along into a
    cache (a residency, perhaps below copies of other operands: the fills of its cost) finds
    it there on every trip after the first: the same data, still cached, since the step's
    tiles fit the level together. So each such operand's fill is paid once, the largest any
    child pays, and the loop's own cost carries it for the loops around. Without this, a
    residency inside a loop cost its trips times as much as the same residency above the
    loop, though the two write the same C (a residency writes none): 1024^3's program that
    stores its register tile every 16 steps of k was priced 1.52 times the chosen one with
    the residency of C's tile inside that loop, 1.09 with it above, and ran 0.995 of its time
    (BENCHMARKS.md). The search offers the residency above the loop too, and the credit
    leaves the residency inside one unit dearer than that: so the cheapest price of a Spec
    and the tree the search picks stay as they were, and of two twins the one listed and
    chosen is always the residency above (``kbest`` orders its lists by the cost without the
    credit, ``kbest.listed_cost``, which puts that twin first).

    ``read_once``, asked only when a child carries fills, gives the operands whose reads an
    unrolled loop already pays once (``LoopAction.loaded_once``, which counts the same
    lines): they are not credited again.
    """
    each = [(n, fills(c)) for n, c in zip(counts, costs, strict=True)]
    if not any(f for _, f in each):  # on the search's hot path: usually none
        return total
    along = {i for i, _ in ctx.ruleset.ops[spec.op].operands_using(var)}
    if read_once is not None:
        along.update(read_once())
    kept = [0] * len(spec.operands)
    credit = 0
    for i in range(len(spec.operands)):
        if i in along:
            continue
        paid = [(n, f[i]) for n, f in each if len(f) > i and f[i]]
        if paid:
            kept[i] = max(x for _, x in paid)
            repeated = sum(n * x for n, x in paid) - kept[i]
            if repeated > 0:
                credit += repeated - 1
    if not credit and not any(kept):
        return total
    if isinstance(total, Cost):
        return Cost(total.base - credit, total.use, tuple(kept), credit)
    return Cost(int(total) - credit, (), tuple(kept), credit)


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
