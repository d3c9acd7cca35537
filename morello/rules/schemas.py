"""The built-in rewrite schemas and size policies, registered like any plugin's.

A schema turns a Spec into the actions one ``rewrite <schema> for <ops> ...`` line of a
rule file offers. Built in: ``tile_out`` (loop over an output index), ``split`` (loop over a
reduction index of an accumulating Spec), ``split_init`` (the same for a Spec that does
not accumulate: its first step initializes the output), ``move`` (bring an operand into a
faster level, possibly with a new layout), ``pipeline`` (compute a graph's first statement
into a temporary, then the rest of the graph), ``split_fuse`` (a graph's first reduction
but its last step into a temporary, the last step fused with the rest),
``parallel_tile_out`` (loop over an output index on several threads, for Specs that may run
in parallel) and ``reside`` (a Spec's whole working set held in an outer cache the hardware
fills, a forced action). A size policy names the loop steps a tiling schema offers for an
extent: ``pow2`` (1, 2, 4, ...), ``pow2_from64`` (64, 128, ...), ``pow2_half`` (half the
extent, a power of two from 64), ``pow2_3`` (1, 2, 3, 4, 6, ...), ``pow2x7`` (7, 14, ...)
and ``all``.
Both kinds are found through the ``morello_rewrite_schemas`` and ``morello_size_policies``
hooks; this module implements them for the built-ins and is registered by
``plugins.Plugins`` before any entry point, so a plugin adds a schema exactly as these are.
Every action makes progress: a smaller tile, a smaller memory limit, or a different op (or
fewer statements), so the Spec graph is acyclic. Knows no op by name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from morello.hookspecs import hookimpl
from morello.layout import Layout, layout_by_name
from morello.nodes import (
    BlockAction,
    InitLoopAction,
    LoopAction,
    MoveAction,
    ParallelLoopAction,
    ResideAction,
    SplitFuseAction,
)
from morello.nodes.reside import resident_operands
from morello.rules.graph import GraphOp, Statement
from morello.rules.index_notation import Access, BinOp, Func, OpDef
from morello.spec import (
    Spec,
    TensorSpec,
    cache_ways,
    interned,
    memory_units,
    snap_down,
    subtract_limits,
)
from morello.target import MemoryLevel, Target

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Action
    from morello.rules.rewrites import SchemaRule

#: Kinds of memory level a rule may name (``into cache, memory``): levels without addresses
#: (caches), addressed levels of buffers (memory), and register levels. A cache that holds
#: whole Specs (``MemoryLevel.whole_specs``, an L2) counts as memory: what is resident there
#: is the buffers in memory, read at the cache's price, and nothing is moved into it.
LEVEL_KINDS = ("cache", "memory", "registers")
#: Which operands a rule may name (``operands inputs``): all of them, or the inputs only.
OPERAND_SETS = ("all", "inputs")


def level_kind(level: MemoryLevel) -> str:
    """Which of LEVEL_KINDS ``level`` is."""
    if level.counts_registers:
        return "registers"
    return "memory" if level.holds_buffers else "cache"


#: A size policy: the loop steps offered for an extent (each below it), in increasing order.
SizePolicy = Callable[[int], Sequence[int]]


class Schema(Protocol):
    """A rewrite schema: the actions a rule line naming it offers for a Spec.

    A schema that loops over reductions of accumulating Specs may say so with a true
    ``splits`` attribute: a rule naming it for an op with no accumulating form is an error.

    A schema may also have ``operand_places(rule, place, ctx)``, where a place is an op,
    whether the Spec accumulates, and an operand position: the places in the children of its
    actions where an operand at ``place`` goes. It promises that each action either keeps
    that operand, at its level, in a child at one of those places, or moves it into one of
    its level's ``moves_to`` (which takes room under the limits). The search uses the
    promise to answer dead ends at once (``morello.search.dead_ends``); without the method,
    Specs the rule applies to are always searched.

    A schema whose ``reports_room`` is true promises that it leaves an action out for lack
    of room under the limits only through ``spec.subtract_limits``, or after telling
    ``spec.short_of``: then the search reuses an answer under larger limits where no action
    left out would fit (``morello.search.solve``). Without it, a Spec the rule applies to
    is solved again under any other limits.
    """

    name: str

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """Every action ``rule`` (whose op patterns matched) offers for ``spec``, in order."""
        ...


# ---- size policies ------------------------------------------------------------------------


def pow2(extent: int) -> list[int]:
    """1, 2, 4, ... below ``extent``."""
    out, s = [], 1
    while s < extent:
        out.append(s)
        s *= 2
    return out


def pow2_3(extent: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, ...: powers of two and three times them, below ``extent``."""
    out, s = [], 1
    while s < extent:
        out.append(s)
        if s > 1 and 3 * s // 2 < extent:
            out.append(3 * s // 2)
        s *= 2
    return out


def every_size(extent: int) -> list[int]:
    """Every size from 1 below ``extent``."""
    return list(range(1, extent))


def pow2x7(extent: int) -> list[int]:
    """7, 14, 28, 56, ...: seven times a power of two, below ``extent``. Named beside
    ``pow2_3`` (a second ``tile_out`` rule), it makes register tiles of 14 or 28 rows
    reachable: 14 x 32 is 28 accumulators of 16 lanes."""
    out, s = [], 7
    while s < extent:
        out.append(s)
        s *= 2
    return out


def pow2_from64(extent: int) -> list[int]:
    """64, 128, 256, ...: the powers of two from 64, below ``extent``. ``split_init`` uses
    it: each first step it offers is a Spec that nothing else reaches (it does not
    accumulate, over a slice of the reduction), and shorter ones doubled the Specs searched
    for the products of the standard set (1024^3: 127k against 79k) without a cheaper
    program among them."""
    return [s for s in pow2(extent) if s >= 64]


def pow2_half(extent: int) -> list[int]:
    """The largest power of two at most half of ``extent``, if that is 64 or more: one size,
    the last step of ``split_fuse``, which splits once. Half leaves the first part at least
    as long, for the search to split further; every size from 64 up nearly doubled
    dense_relu's cold synthesis (BENCHMARKS.md), and a shorter reduction fits beside a tile
    whole."""
    step = 64
    if step * 2 > extent:
        return []
    while step * 4 <= extent:
        step *= 2
    return [step]


BUILTIN_SIZE_POLICIES: Mapping[str, SizePolicy] = {
    "pow2": pow2,
    "pow2_from64": pow2_from64,
    "pow2_half": pow2_half,
    "pow2_3": pow2_3,
    "pow2x7": pow2x7,
    "all": every_size,
}


# ---- schemas ------------------------------------------------------------------------------


def same_place(
    rule: SchemaRule, place: tuple[str, bool, int], ctx: SynthesisContext
) -> set[tuple[str, bool, int]]:
    """``Schema.operand_places`` of a schema whose children keep the Spec's op, its form and
    its operand order (a loop, a move): every operand stays at its place."""
    return {place}


@attrs.frozen
class TileOut:
    """Loop over one output index in steps its rule's size policy gives (a tail if needed)."""

    name: str = "tile_out"
    reports_room = True  # (see Schema)

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A loop per tileable output index and step."""
        for var in ctx.ruleset.ops[spec.op].tileable_vars:
            yield from _loops(self.name, spec, ctx, var, rule.sizes)

    def actions_making(
        self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext, decision: tuple[Any, ...]
    ) -> Iterator[Action]:
        """The actions that may make ``decision`` (the loop over its index)."""
        if len(decision) == 4 and decision[2] in ctx.ruleset.ops[spec.op].tileable_vars:
            yield from _loops(self.name, spec, ctx, decision[2], rule.sizes, decision[3])

    operand_places = staticmethod(same_place)


@attrs.frozen
class Split:
    """Loop over one reduction index of an accumulating Spec."""

    name: str = "split"
    reports_room = True  # (see Schema)
    #: Splits along reductions: a rule may name only ops with an accumulating form.
    splits: bool = True

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A loop per reduction index and step, for accumulating Specs only."""
        if spec.accum:
            for var in ctx.ruleset.ops[spec.op].reduction_vars:
                yield from _loops(self.name, spec, ctx, var, rule.sizes)

    def actions_making(
        self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext, decision: tuple[Any, ...]
    ) -> Iterator[Action]:
        """The actions that may make ``decision`` (the loop over its index)."""
        vars_ = ctx.ruleset.ops[spec.op].reduction_vars
        if spec.accum and len(decision) == 4 and decision[2] in vars_:
            yield from _loops(self.name, spec, ctx, decision[2], rule.sizes, decision[3])

    operand_places = staticmethod(same_place)


@attrs.frozen
class SplitInit:
    """Loop over one reduction index of a Spec that does not accumulate, the first step
    initializing the output and the others accumulating into it (``InitLoopAction``)."""

    name: str = "split_init"
    reports_room = True  # (see Schema)
    #: Splits along reductions: a rule may name only ops with an accumulating form.
    splits: bool = True

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A loop of two or more trips per reduction index and step, for non-accumulating
        Specs of ops that have an accumulating form whose output lives in a kind of level
        the rule names (``into``: the fill this saves is worth most through memory)."""
        yield from self._loops(rule, spec, ctx)

    def actions_making(
        self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext, decision: tuple[Any, ...]
    ) -> Iterator[Action]:
        """The actions that may make ``decision`` (the loop over its index and step)."""
        if len(decision) == 4:
            yield from self._loops(rule, spec, ctx, decision[2], decision[3])

    def _loops(
        self,
        rule: SchemaRule,
        spec: Spec,
        ctx: SynthesisContext,
        only_var: str | None = None,
        only_step: int | None = None,
    ) -> Iterator[InitLoopAction]:
        if spec.accum or level_kind(spec.output.level) not in rule.into:
            return
        opdef = ctx.ruleset.ops[spec.op]
        if getattr(opdef, "combiner", None) is None:  # a graph op has none
            return
        for var in opdef.reduction_vars:
            if only_var is None or var == only_var:
                yield from _init_loops(self.name, spec, ctx, var, rule.sizes, only_step)

    def operand_places(
        self, rule: SchemaRule, place: tuple[str, bool, int], ctx: SynthesisContext
    ) -> set[tuple[str, bool, int]]:
        """Each operand keeps its position, in the first step (which does not accumulate)
        and in the later ones (which do)."""
        op, accum, position = place
        return set() if accum else {(op, False, position), (op, True, position)}


@attrs.frozen
class Move:
    """Bring an operand into a level the target allows, in a layout the rule allows."""

    name: str = "move"
    reports_room = True  # (see Schema)

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A move per operand, destination level, layout and vector size."""
        yield from _moves(rule, spec, ctx)

    def actions_making(
        self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext, decision: tuple[Any, ...]
    ) -> Iterator[Action]:
        """The actions that may make ``decision`` (moves of its operand to its level)."""
        if len(decision) == 6:
            yield from _moves(rule, spec, ctx, decision[2], decision[3])

    operand_places = staticmethod(same_place)


@attrs.frozen
class Pipeline:
    """Peel a graph's first statement into a temporary, then run the rest of the graph.

    The temporary is placed as a move's new buffer would be (every addressed level, layout
    and vector size; ``temp_buffers``) and the block holds it for both stages.
    """

    name: str = "pipeline"
    reports_room = True  # (see Schema)

    def operand_places(
        self, rule: SchemaRule, place: tuple[str, bool, int], ctx: SynthesisContext
    ) -> set[tuple[str, bool, int]]:
        """Where the two stages read or write the operand (see ``Schema``)."""
        op, accum, position = place
        graph = ctx.ruleset.ops[op]
        if not isinstance(graph, GraphOp) or accum:
            return set()
        first, rest_op, rest_tensors = _peeled(graph, ctx)
        tensor = graph.tensor_names[position]
        first_tensors = (*first.args, first.target)
        out = {(first.op, False, j) for j, t in enumerate(first_tensors) if t == tensor}
        out.update((rest_op, False, j) for j, t in enumerate(rest_tensors) if t == tensor)
        return out

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A block per placement of the first statement's output."""
        graph = ctx.ruleset.ops[spec.op]
        if not isinstance(graph, GraphOp) or spec.accum:
            return
        first, rest_op, rest_tensors = _peeled(graph, ctx)
        sizes = graph.sizes([t.shape for t in spec.operands])
        assert isinstance(sizes, dict)
        shape = graph.tensor_shape(first.target, sizes)
        out = spec.output
        index = {name: i for i, name in enumerate(graph.tensor_names)}
        temp_index = len(spec.operands)
        first_map = (*(index[a] for a in first.args), temp_index)
        rest_map = tuple(index.get(t, temp_index) for t in rest_tensors)
        base = TensorSpec(shape, out.dtype, out.level, out.layout)
        for layout_name, temp in temp_buffers(base, ctx, rule.layouts):
            idx = ctx.target.level_index(temp.level)
            units = memory_units(temp, temp.level)
            limits = subtract_limits(ctx.target, spec.limits, idx, units)
            if limits is None:
                continue
            tensors = (*spec.operands, temp)
            serial = serial_over(spec, (temp,), ctx)
            stages = (
                Spec(first.op, tuple(tensors[i] for i in first_map), False, limits, serial),
                Spec(rest_op, tuple(tensors[i] for i in rest_map), False, limits, serial),
            )
            yield BlockAction(self.name, stages, (first_map, rest_map), ((layout_name, temp),))


@attrs.frozen
class SplitFuse:
    """Split a graph's first statement along its reduction: all but the last step into a
    temporary, the last step fused with the rest of the graph, which adds the temporary in
    (``SplitFuseAction``). Offered for graphs whose first statement has an accumulating
    form and reduces over an index only it reads, when the rule set declares the elementwise
    op that combines two partial results (``a + b`` for a sum, ``max(a, b)`` for a maximum),
    at each last step of the rule's size policy below the extent, and for outputs in a kind
    of level the rule names (``into``), the temporary placed as ``pipeline`` places one.
    """

    name: str = "split_fuse"
    reports_room = True  # (see Schema)

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A block per last step and placement of the temporary."""
        if spec.accum or level_kind(spec.output.level) not in rule.into:
            return
        plan = _split_fuse_plan(spec.op, ctx)
        if plan is None:
            return
        graph, var, first_op, rest_op, maps = plan
        uses = graph.operands_using(var)
        i, d = uses[0]
        extent = spec.operands[i].shape[d]
        sizes = graph.sizes([t.shape for t in spec.operands])
        assert isinstance(sizes, dict)
        out = spec.output
        shape = graph.tensor_shape(graph.statements[0].target, sizes)
        base = TensorSpec(shape, out.dtype, out.level, out.layout)
        for step in ctx.size_policies[rule.sizes](extent):
            if step >= extent:
                continue
            head = _retile(spec, uses, extent - step)
            last = _retile(spec, uses, step)
            if head is None or last is None:
                continue
            for layout_name, temp in temp_buffers(base, ctx, rule.layouts):
                if level_kind(temp.level) not in rule.into:
                    continue
                idx = ctx.target.level_index(temp.level)
                units = memory_units(temp, temp.level)
                limits = subtract_limits(ctx.target, spec.limits, idx, units)
                if limits is None:
                    continue
                serial = serial_over(spec, (temp,), ctx)
                stages = tuple(
                    Spec(op, tuple((*part.operands, temp)[j] for j in m), False, limits, serial)
                    for op, part, m in ((first_op, head, maps[0]), (rest_op, last, maps[1]))
                )
                temps = ((layout_name, temp),)
                yield SplitFuseAction(
                    self.name, stages, maps, temps, var, extent - step, step, uses
                )

    def operand_places(
        self, rule: SchemaRule, place: tuple[str, bool, int], ctx: SynthesisContext
    ) -> set[tuple[str, bool, int]]:
        """Where the two stages read or write the operand (see ``Schema``)."""
        op, accum, position = place
        plan = None if accum else _split_fuse_plan(op, ctx)
        if plan is None:
            return set()
        _, _, first_op, rest_op, maps = plan
        return {
            (stage_op, False, j)
            for stage_op, m in zip((first_op, rest_op), maps, strict=True)
            for j, k in enumerate(m)
            if k == position
        }


_Plan = tuple[GraphOp, str, str, str, tuple[tuple[int, ...], tuple[int, ...]]]


def _split_fuse_plan(op: str, ctx: SynthesisContext) -> _Plan | None:
    """For a graph op that ``SplitFuse`` applies to: the graph, its reduction variable, the
    ops of the two stages, and each stage's operands as indices into the graph's operands
    then the temporary. None for other ops. Worked out once per op and context."""
    cache = ctx.derived.setdefault("split_fuse", {})
    if op not in cache:
        cache[op] = _make_split_fuse_plan(op, ctx)
    return cache[op]  # type: ignore[no-any-return]


def _make_split_fuse_plan(op: str, ctx: SynthesisContext) -> _Plan | None:
    graph = ctx.ruleset.ops[op]
    if not isinstance(graph, GraphOp):
        return None
    first, first_def = graph.statements[0], graph.defs[0]
    if first_def.combiner is None or len(first_def.reduction_vars) != 1:
        return None
    var = graph.statement_vars(0)[first_def.reduction_vars[0]]
    names = graph.tensor_names
    # Only the first statement may read what the index runs along: the others read their
    # operands whole, and the two stages read two parts of them.
    readers = [names[i] for i, _ in graph.operands_using(var)]
    if any(t in s.args for t in readers for s in graph.statements[1:]):
        return None
    combine = _combining_op(first_def.combiner, first_def.rank(len(first_def.inputs)), ctx)
    if combine is None or _adds_partial(graph, combine):
        return None
    rest, rest_tensors = graph.with_partial(combine, {combine: ctx.ruleset.ops[combine]})
    rest = ctx.ruleset.ops.graph(rest)
    temp = len(names)
    index = {t: i for i, t in enumerate(names)}
    first_map = (*(index[a] for a in first.args), temp)
    rest_map = tuple(index.get(t, temp) for t in rest_tensors)
    return graph, var, first.op, rest.name, (first_map, rest_map)


def _adds_partial(graph: GraphOp, combine: str) -> bool:
    """Whether ``graph`` already adds an input to its first statement's result right away
    (a split's second stage): it is split once, its first stage as often as the search likes."""
    if len(graph.statements) < 2:
        return False
    first, second = graph.statements[0], graph.statements[1]
    inputs = set(graph.input_names)
    return (
        second.op == combine
        and first.target in second.args
        and any(a in inputs for a in second.args)
    )


def _combining_op(combiner: str, rank: int, ctx: SynthesisContext) -> str | None:
    """The first op of the rule set that combines two operands of rank ``rank`` elementwise
    as ``combiner`` does (``a + b`` for a sum, ``max(a, b)`` for a maximum); None if none."""
    for name, opdef in ctx.ruleset.ops.items():
        if not isinstance(opdef, OpDef) or len(opdef.inputs) != 2:
            continue
        idx = opdef.output.indices
        a, b = (Access(acc.tensor, idx) for acc in opdef.inputs)
        if len(idx) != rank or any(acc.indices != idx for acc in opdef.inputs):
            continue
        want = BinOp("+", a, b) if combiner == "sum" else Func(combiner, (a, b))
        if opdef.expr == want:
            return name
    return None


def _peeled(graph: GraphOp, ctx: SynthesisContext) -> tuple[Statement, str, tuple[str, ...]]:
    """The first statement, the op of the rest (a graph op, or the last statement's op), and
    the rest's tensors in ``graph``'s names."""
    first, rest, rest_tensors = graph.peel()
    rest_op = graph.statements[-1].op if rest is None else ctx.ruleset.ops.graph(rest).name
    return first, rest_op, rest_tensors


@attrs.frozen
class ParallelTileOut:
    """Loop over one output index on several threads (``ParallelLoopAction``).

    Only for Specs that may run in parallel (``Spec.serial`` false), when the context allows
    more than one thread, and when every operand lives in the first level, which all cores
    share (see ``serial_over``); only loops of two trips or more. The body and tail are
    serial, so parallel loops never nest, and the body gets its thread's share of the first
    level's limit (unless that level bounds each buffer on its own; see
    ``morello.nodes.parallel``).
    """

    name: str = "parallel_tile_out"
    reports_room = True  # (see Schema)

    operand_places = staticmethod(same_place)

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A parallel loop per tileable output index and step."""
        if spec.serial or ctx.threads < 2:
            return
        if serial_over(spec, spec.operands, ctx):
            return
        for var in ctx.ruleset.ops[spec.op].tileable_vars:
            for loop in _loops(self.name, spec, ctx, var, rule.sizes):
                if loop.trips < 2:
                    continue
                workers = min(loop.trips, ctx.threads)
                share = list(spec.limits)
                if not ctx.target.levels[0].per_buffer:  # else each buffer only has to fit
                    share[0] = snap_down(share[0] // workers)
                body = attrs.evolve(loop.body, serial=True, limits=tuple(share))
                tail = None if loop.tail is None else attrs.evolve(loop.tail, serial=True)
                yield ParallelLoopAction(
                    self.name, var, loop.step, loop.trips, ctx.threads, body, tail
                )


@attrs.frozen
class Reside:
    """Hold a Spec's whole working set in a cache the hardware fills implicitly.

    For each level marked ``whole_specs`` that still has room in the Spec's limits: when
    the operands living in levels that move into it fit there together, all of them that
    the Spec reuses move there at once (a ``ResideAction``, which is forced: see
    ``morello.nodes.reside``).
    """

    name: str = "reside"
    reports_room = True  # (see Schema)

    operand_places = staticmethod(same_place)

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """At most one residency per such level."""
        for idx in ctx.target.whole_specs_levels:
            got = resident_operands(spec, idx, ctx)
            if got is None:
                continue
            moved, operands = got
            limits = list(spec.limits)
            limits[idx] = 0
            serial = serial_over(spec, operands, ctx)
            body = Spec(spec.op, operands, spec.accum, tuple(limits), serial)
            yield ResideAction(self.name, ctx.target.levels[idx].name, moved, body)


BUILTIN_SCHEMAS: Mapping[str, Schema] = {
    s.name: s
    for s in (
        TileOut(),
        Split(),
        SplitInit(),
        Move(),
        Pipeline(),
        SplitFuse(),
        ParallelTileOut(),
        Reside(),
    )
}


@hookimpl
def morello_rewrite_schemas() -> list[Schema]:
    """The built-in schemas: tile_out, split, split_init, move, pipeline, split_fuse,
    parallel_tile_out, reside."""
    return list(BUILTIN_SCHEMAS.values())


@hookimpl
def morello_size_policies() -> Mapping[str, SizePolicy]:
    """The built-in size policies: pow2, pow2_from64, pow2_half, pow2_3, pow2x7, all."""
    return BUILTIN_SIZE_POLICIES


# ---- how the built-ins tile and move ------------------------------------------------------


def serial_over(spec: Spec, tensors: Iterable[TensorSpec], ctx: SynthesisContext) -> bool:
    """Whether a Spec derived from ``spec`` that works on ``tensors`` must be serial.

    It must when ``spec`` must, or when one of ``tensors`` lives in a level other than the
    first: caches and registers are each core's own, so code working in them runs on the
    one core that holds them. Only Specs over the first level (main memory, which all cores
    share) may run in parallel, which also keeps the serial and parallel Specs to search
    from doubling below the first move. A cache holding whole Specs (an L2) is the
    exception: what is resident there is buffers in main memory, which a parallel loop's
    threads read through their own cores' caches, each its share and what all share.
    """
    first = ctx.target.levels[0]
    return spec.serial or any(t.level != first and not t.level.whole_specs for t in tensors)


def _retile(spec: Spec, uses: tuple[tuple[int, int], ...], size: int) -> Spec | None:
    """``spec`` with the index whose (operand, dim) ``uses`` are given shrunk to ``size``;
    None if an operand can't be tiled so."""
    operands = list(spec.operands)
    for i, d in uses:
        new = tile_tensor(operands[i], d, size)
        if new is None:
            return None
        operands[i] = new
    return spec.with_operands(operands)


@functools.lru_cache(maxsize=1 << 18)
def tile_tensor(ts: TensorSpec, dim: int, size: int) -> TensorSpec | None:
    """``ts`` with dim ``dim`` shrunk to ``size``; None if its layout or vector size forbid it
    (a vector-register tile must be whole registers).

    Memoized (TensorSpecs are immutable) so that equal tiles are the same object, which makes
    the dictionary lookups of the search cheap.
    """
    shape = list(ts.shape)
    shape[dim] = size
    layout = ts.layout.tile(ts.shape, shape)
    if layout is None:
        return None
    new = interned(TensorSpec(tuple(shape), ts.dtype, ts.level, layout, ts.vector_size))
    # A tile of vector registers is whole registers: each of its contiguous runs a multiple
    # of the vector size (a row of a column-major register tile is not).
    vs = new.vector_size
    if vs and (new.volume % vs or (new.volume // layout.runs(shape)) % vs):
        return None
    return new


def _loops(
    rule: str, spec: Spec, ctx: SynthesisContext, var: str, policy: str, only: int | None = None
) -> Iterator[LoopAction]:
    """Loops over ``var`` in each step of ``policy`` (only step ``only``, if given).

    A loop that runs along an operand in registers is unrolled in C, and the compiler then
    loads an input the loop does not run along once and keeps it in registers across the
    trips (the loads of every trip are the same). So such a loop is offered only when those
    inputs are in registers already, where the model counts them, or no kernel could copy
    them there (``_hides_held_values``): a 3x32 register tile split into two halves of 16
    columns, each half loading A's three scalars, was priced at 15 registers and needed 17
    (BENCHMARKS.md, "A row of B loaded once").
    """
    uses = ctx.ruleset.ops[spec.op].operands_using(var)
    i, d = uses[0]
    extent = spec.operands[i].shape[d]
    whole_only = _hides_held_values(spec, uses, ctx)  # then only a loop of one trip
    for size in ctx.size_policies[policy](extent):
        if (only is not None and size != only) or (whole_only and size != extent):
            continue
        body = _retile(spec, uses, size)
        if body is None:
            continue
        tail = None
        if extent % size:
            tail = _retile(spec, uses, extent % size)
            if tail is None:
                continue
        yield LoopAction(rule, var, size, extent // size, body, tail)


def _hides_held_values(
    spec: Spec, uses: tuple[tuple[int, int], ...], ctx: SynthesisContext
) -> bool:
    """Whether a loop along ``uses`` is unrolled (it runs along an operand in registers)
    while an input it does not run along is outside registers and could be moved into them
    (some kernel copies its dtype into a register level, and some move rule for the Spec's
    op may bring inputs into registers; a bf16 vector whose kernels widen each element as
    they read it has no such kernel, a graph no such rule, and their loops stay as they
    were).

    A single element is exempt: the compiler folds its load into each instruction that
    reads it (spr's FMAs broadcast A from memory) or holds it in one register, and spr's
    28-accumulator tile, whose rows run two vectors of B against one such scalar, compiles
    without a spill."""
    moving = {i for i, _ in uses}
    if not any(spec.operands[i].level.counts_registers for i in moving):
        return False
    if not _moves_into_registers(spec, ctx):
        return False
    last = len(spec.operands) - 1
    for i, ts in enumerate(spec.operands):
        if i == last or i in moving or ts.level.counts_registers or ts.volume == 1:
            continue
        for name in ctx.ruleset.copies_into(ts.dtype.name, len(ts.shape)):
            if ctx.target.level(name).counts_registers:
                return True
    return False


def _moves_into_registers(spec: Spec, ctx: SynthesisContext) -> bool:
    """Whether some move rule may bring an input of ``spec`` into registers (a graph's moves
    go into caches only: its inputs reach registers in its statements' own Specs)."""
    cache = ctx.derived.setdefault("moves_into_registers", {})
    key = (spec.op, spec.accum)
    got = cache.get(key)
    if got is None:
        got = cache[key] = any(
            isinstance(ctx.schemas.get(r.schema), Move)
            and "registers" in r.into
            and any(p.matches(spec) for p in r.patterns)
            for r in ctx.ruleset.rules
            if isinstance(getattr(r, "into", None), tuple)
        )
    return got  # type: ignore[no-any-return]


def _init_loops(
    rule: str,
    spec: Spec,
    ctx: SynthesisContext,
    var: str,
    policy: str,
    only: int | None = None,
) -> Iterator[InitLoopAction]:
    """Loops over reduction index ``var`` of non-accumulating ``spec`` in each step of
    ``policy`` (only step ``only``, if given) that leaves at least two trips, the first
    initializing."""
    for loop in _loops(rule, spec, ctx, var, policy, only):
        if loop.trips < 2:
            continue
        tail = None if loop.tail is None else attrs.evolve(loop.tail, accum=True)
        body = attrs.evolve(loop.body, accum=True)
        yield InitLoopAction(rule, var, loop.step, loop.trips, loop.body, body, tail)


def _moves(
    rule: SchemaRule,
    spec: Spec,
    ctx: SynthesisContext,
    only_operand: int | None = None,
    only_level: str | None = None,
) -> Iterator[MoveAction]:
    """Moves of each operand to each level (only ``only_operand``, ``only_level`` if given)."""
    target = ctx.target
    last = len(spec.operands) - 1
    for idx, ts in enumerate(spec.operands):
        if idx == last and rule.operands == "inputs":
            continue
        if only_operand is not None and idx != only_operand:
            continue
        copy_op = ctx.ruleset.copy_op(len(ts.shape))
        if copy_op is None:
            continue
        src_level = ts.level
        reads = idx != last or spec.accum
        writes = idx == last
        for dest_name in src_level.moves_to:
            if only_level is not None and dest_name != only_level:
                continue
            dest_level = target.level(dest_name)
            if dest_level.whole_specs or level_kind(dest_level) not in rule.into:
                continue
            level_idx = target.level_index(dest_name)
            for layout_name, dest in _destinations(rule, ts, dest_level, ctx):
                if dest == ts:
                    continue
                # A named layout at a cache level is a packed buffer there: a copy-in, so
                # only of operands the Spec reads and does not write.
                new_buffer = dest_level.addressed or layout_name is not None
                if new_buffer and not dest_level.addressed and writes:
                    continue
                if not new_buffer and cache_ways(dest, dest_level) > dest_level.ways:
                    continue
                units = memory_units(dest, dest_level)
                limits = subtract_limits(target, spec.limits, level_idx, units)
                if limits is None:
                    continue
                operands = list(spec.operands)
                operands[idx] = dest
                serial = serial_over(spec, (dest,), ctx)
                body = Spec(spec.op, tuple(operands), spec.accum, limits, serial)
                prologue = epilogue = None
                if new_buffer and reads:
                    prologue = Spec(copy_op, (ts, dest), False, limits, serial)
                if new_buffer and writes:
                    epilogue = Spec(copy_op, (dest, ts), False, limits, serial)
                yield MoveAction(
                    rule.name, idx, dest, layout_name, new_buffer, prologue, body, epilogue
                )


def _destinations(
    rule: SchemaRule, ts: TensorSpec, level: MemoryLevel, ctx: SynthesisContext
) -> tuple[tuple[str | None, TensorSpec], ...]:
    """Candidate (layout name, TensorSpec) for ``ts`` moved into ``level``, in a fixed order.

    The layout name is None for a cache, which keeps the source layout. Layout families that
    coincide on this shape are offered once, under the first name.
    """
    return _destinations_for(rule.layouts, ts, level, ctx.target)


@functools.lru_cache(maxsize=1 << 16)
def _destinations_for(
    rule_layouts: tuple[str, ...], ts: TensorSpec, level: MemoryLevel, target: Target
) -> tuple[tuple[str | None, TensorSpec], ...]:
    if not level.addressed:
        names = tuple(n for n in level.packs if rule_layouts == ("*",) or n in rule_layouts)
        buffers = _buffers_for(names, ts, level, target)
        if level.packs_only:
            # Copies only, and only of tiles too big for the inner caches that pack: what
            # fits one of them is packed there, where reading it is cheaper.
            inner = [target.level(n) for n in level.moves_to if target.level(n).packs]
            return tuple(
                (name, dest)
                for name, dest in buffers
                if all(memory_units(dest, lv) > lv.limit_units for lv in inner)
            )
        # A cache holds the same bytes: same layout, same contiguity.
        cached = interned(attrs.evolve(ts, level=level, vector_size=None))
        # Or a packed copy: a new, contiguous buffer in one of the layouts the level packs
        # into (and the rule allows). A copy the body could not tell from the cached view
        # (same layout, same contiguity) is left out: it would cost a copy, change nothing.
        packed = tuple((name, dest) for name, dest in buffers if dest.layout != cached.layout)
        return ((None, cached), *packed)
    names = target.layouts if rule_layouts == ("*",) else rule_layouts
    return _buffers_for(names, ts, level, target)


def _buffers_for(
    names: tuple[str, ...], ts: TensorSpec, level: MemoryLevel, target: Target
) -> tuple[tuple[str | None, TensorSpec], ...]:
    """New buffers for ``ts`` at ``level``: one per distinct layout of ``names`` and vector size."""
    rank = len(ts.shape)
    if level.counts_registers and not level.vector_bytes:
        # Scalar registers are separate variables: layout means nothing there.
        names = names[:1]
    layouts: list[tuple[str, Layout]] = []
    for name in names:
        lay = layout_by_name(name, rank)
        canon = None if lay is None else lay.canonical(ts.shape)
        if canon is not None and all(canon != have for _, have in layouts):
            layouts.append((name, canon))
    vector_sizes: list[int | None] = [None]
    if level.vector_bytes:
        elem = ts.dtype.size
        vector_sizes = [
            vb // elem
            for vb in level.vector_bytes
            if vb % elem == 0
            and ts.volume % (vb // elem) == 0
            and target.vector_type(ts.dtype, vb // elem) is not None
        ]
    out: list[tuple[str | None, TensorSpec]] = []
    for name, layout in layouts:
        for vs in vector_sizes:
            out.append((name, interned(TensorSpec(ts.shape, ts.dtype, level, layout, vs))))
    return tuple(out)


def temp_buffers(
    ts: TensorSpec,
    ctx: SynthesisContext,
    layouts: tuple[str, ...] = ("*",),
    registers_only: bool = False,
) -> tuple[tuple[str | None, TensorSpec], ...]:
    """Where a new temporary shaped like ``ts`` may live: every addressed level of the
    target (every register level with ``registers_only``), in each of its layouts (those of
    ``layouts`` unless ``*``) and vector sizes (as a move's new buffers). Worked out once
    per context and shape (a graph's pipeline asks at every Spec of it)."""
    cache = ctx.derived.setdefault("temp_buffers", {})
    key = (ts, layouts, registers_only)
    got = cache.get(key)
    if got is None:
        got = cache[key] = _temp_buffers(ts, ctx, layouts, registers_only)
    return got  # type: ignore[no-any-return]


def _temp_buffers(
    ts: TensorSpec, ctx: SynthesisContext, layouts: tuple[str, ...], registers_only: bool
) -> tuple[tuple[str | None, TensorSpec], ...]:
    names = ctx.target.layouts
    if layouts != ("*",):
        names = tuple(n for n in names if n in layouts) or names
    out: list[tuple[str | None, TensorSpec]] = []
    for lv in ctx.target.levels:
        if lv.addressed and (lv.counts_registers or not registers_only):
            out.extend(_buffers_for(names, ts, lv, ctx.target))
    return tuple(out)
