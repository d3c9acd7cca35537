"""The generic rewrite schemas and the rules that instantiate them.

Schemas: ``tile_out`` (loop over an output index), ``split`` (loop over a reduction index of
an accumulating Spec), ``move`` (bring an operand into a faster level, possibly with a new
layout), and decompositions written as ``pattern => { stages }`` (e.g. zero-then-accumulate).
Every action makes progress: a smaller tile, a smaller memory limit, or a different op, so the
Spec graph is acyclic. Knows no op by name: ops are looked up in the rule set.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from morello.dtypes import dtype
from morello.errors import SourceLocation
from morello.impl import Action
from morello.layout import Layout, layout_by_name
from morello.nodes import BlockAction, LoopAction, MoveAction
from morello.spec import Spec, TensorSpec, cache_ways, memory_units, subtract_limits
from morello.target import Target

if TYPE_CHECKING:
    from morello.context import SynthesisContext

SCHEMAS: Final = ("tile_out", "split", "move")
SIZE_POLICIES: Final = ("pow2", "pow2_3", "all")


@attrs.frozen
class OpPattern:
    """``matmul``, ``accum matmul``, ``*`` or ``accum *``."""

    op: str
    accum_only: bool = False

    def matches(self, spec: Spec) -> bool:
        """Whether a Spec's op (and accumulation) fits."""
        if self.accum_only and not spec.accum:
            return False
        return self.op == "*" or self.op == spec.op


@attrs.frozen
class SchemaRule:
    """``rewrite <schema> for <ops> [sizes pow2|all] [layouts ...]``."""

    schema: str
    patterns: tuple[OpPattern, ...] = attrs.field(converter=tuple)
    sizes: str = "pow2"
    layouts: tuple[str, ...] = attrs.field(default=("*",), converter=tuple)
    loc: SourceLocation | None = attrs.field(default=None, eq=False)

    @property
    def name(self) -> str:
        """Rules are named after their schema."""
        return self.schema

    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """Every action this rule offers for ``spec``, in a fixed order."""
        if not any(p.matches(spec) for p in self.patterns):
            return
        opdef = ctx.ruleset.ops[spec.op]
        if self.schema == "tile_out":
            for var in opdef.output.indices:
                yield from _loops(self.schema, spec, ctx, var, self.sizes)
        elif self.schema == "split":
            if spec.accum:
                for var in opdef.reduction_vars:
                    yield from _loops(self.schema, spec, ctx, var, self.sizes)
        else:
            yield from _moves(self, spec, ctx)


def _tile_sizes(extent: int, policy: str) -> list[int]:
    """Tile sizes below ``extent``: every size, powers of two, or those and three times them."""
    if policy == "all":
        return list(range(1, extent))
    out, s = [], 1
    while s < extent:
        out.append(s)
        if policy == "pow2_3" and s > 1 and 3 * s // 2 < extent:
            out.append(3 * s // 2)
        s *= 2
    return out


def _retile(spec: Spec, ctx: SynthesisContext, var: str, size: int) -> Spec | None:
    """``spec`` with index ``var`` shrunk to ``size``; None if an operand can't be tiled so."""
    opdef = ctx.ruleset.ops[spec.op]
    operands = list(spec.operands)
    for i, d in opdef.operands_using(var):
        new = tile_tensor(operands[i], d, size)
        if new is None:
            return None
        operands[i] = new
    return spec.with_operands(operands)


@functools.lru_cache(maxsize=1 << 18)
def tile_tensor(ts: TensorSpec, dim: int, size: int) -> TensorSpec | None:
    """``ts`` with dim ``dim`` shrunk to ``size``; None if its layout or vector size forbid it.

    Memoized (TensorSpecs are immutable) so that equal tiles are the same object, which makes
    the dictionary lookups of the search cheap.
    """
    shape = list(ts.shape)
    shape[dim] = size
    layout = ts.layout.tile(ts.shape, shape)
    if layout is None:
        return None
    new = TensorSpec(tuple(shape), ts.dtype, ts.level, layout, ts.vector_size)
    if new.vector_size and new.volume % new.vector_size:
        return None
    return new


def _loops(
    rule: str, spec: Spec, ctx: SynthesisContext, var: str, policy: str
) -> Iterator[LoopAction]:
    opdef = ctx.ruleset.ops[spec.op]
    i, d = opdef.operands_using(var)[0]
    extent = spec.operands[i].shape[d]
    for size in _tile_sizes(extent, policy):
        body = _retile(spec, ctx, var, size)
        if body is None:
            continue
        tail = None
        if extent % size:
            tail = _retile(spec, ctx, var, extent % size)
            if tail is None:
                continue
        yield LoopAction(rule, var, size, extent // size, body, tail)


def _moves(rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[MoveAction]:
    target = ctx.target
    last = len(spec.operands) - 1
    for idx, ts in enumerate(spec.operands):
        copy_op = ctx.ruleset.copy_op(len(ts.shape))
        if copy_op is None:
            continue
        src_level = target.level(ts.level)
        elem = ctx.dtype(ts.dtype).size
        reads = idx != last or spec.accum
        writes = idx == last
        for dest_name in src_level.moves_to:
            dest_level = target.level(dest_name)
            level_idx = target.level_index(dest_name)
            for layout_name, dest in _destinations(rule, ts, dest_level.name, ctx):
                if dest == ts:
                    continue
                # A named layout at a cache level is a packed buffer there: a copy-in, so
                # only of operands the Spec reads and does not write.
                new_buffer = dest_level.addressed or layout_name is not None
                if new_buffer and not dest_level.addressed and writes:
                    continue
                if not new_buffer and cache_ways(dest, dest_level, elem) > dest_level.ways:
                    continue
                units = memory_units(dest, dest_level, elem)
                limits = subtract_limits(target, spec.limits, level_idx, units)
                if limits is None:
                    continue
                operands = list(spec.operands)
                operands[idx] = dest
                body = Spec(spec.op, tuple(operands), spec.accum, limits, spec.serial)
                prologue = epilogue = None
                if new_buffer and reads:
                    prologue = Spec(copy_op, (ts, dest), False, limits, spec.serial)
                if new_buffer and writes:
                    epilogue = Spec(copy_op, (dest, ts), False, limits, spec.serial)
                yield MoveAction(
                    rule.name, idx, dest, layout_name, new_buffer, prologue, body, epilogue
                )


def _destinations(
    rule: SchemaRule, ts: TensorSpec, level: str, ctx: SynthesisContext
) -> tuple[tuple[str | None, TensorSpec], ...]:
    """Candidate (layout name, TensorSpec) for ``ts`` moved into ``level``, in a fixed order.

    The layout name is None for a cache, which keeps the source layout. Layout families that
    coincide on this shape are offered once, under the first name.
    """
    return _destinations_for(rule.layouts, ts, level, ctx.target)


@functools.lru_cache(maxsize=1 << 16)
def _destinations_for(
    rule_layouts: tuple[str, ...], ts: TensorSpec, level: str, target: Target
) -> tuple[tuple[str | None, TensorSpec], ...]:
    lv = target.level(level)
    if not lv.addressed:
        # A cache holds the same bytes: same layout, same contiguity.
        cached = attrs.evolve(ts, level=level, vector_size=None)
        # Or a packed copy: a new, contiguous buffer in one of the layouts the level packs
        # into (and the rule allows). A copy the body could not tell from the cached view
        # (same layout, same contiguity) is left out: it would cost a copy, change nothing.
        names = tuple(n for n in lv.packs if rule_layouts == ("*",) or n in rule_layouts)
        packed = tuple(
            (name, dest)
            for name, dest in _buffers_for(names, ts, level, target)
            if dest.layout != cached.layout
        )
        return ((None, cached), *packed)
    names = target.layouts if rule_layouts == ("*",) else rule_layouts
    return _buffers_for(names, ts, level, target)


def _buffers_for(
    names: tuple[str, ...], ts: TensorSpec, level: str, target: Target
) -> tuple[tuple[str | None, TensorSpec], ...]:
    """New buffers for ``ts`` at ``level``: one per distinct layout of ``names`` and vector size."""
    lv = target.level(level)
    rank = len(ts.shape)
    if lv.counts_registers and not lv.vector_bytes:
        # Scalar registers are separate variables: layout means nothing there.
        names = names[:1]
    layouts: list[tuple[str, Layout]] = []
    for name in names:
        lay = layout_by_name(name, rank)
        canon = None if lay is None else lay.canonical(ts.shape)
        if canon is not None and all(canon != have for _, have in layouts):
            layouts.append((name, canon))
    vector_sizes: list[int | None] = [None]
    if lv.vector_bytes:
        elem = dtype(ts.dtype).size
        vector_sizes = [
            vb // elem
            for vb in lv.vector_bytes
            if vb % elem == 0
            and ts.volume % (vb // elem) == 0
            and target.vector_type(ts.dtype, vb // elem) is not None
        ]
    out: list[tuple[str | None, TensorSpec]] = []
    for name, layout in layouts:
        for vs in vector_sizes:
            out.append((name, TensorSpec(ts.shape, ts.dtype, level, layout, vs)))
    return tuple(out)


@attrs.frozen
class Stage:
    """One statement of a decomposition body: ``target (=|+=) op(args)``."""

    target: str
    accum: bool
    op: str
    args: tuple[str, ...] = attrs.field(converter=tuple)


@attrs.frozen
class DecomposeRule:
    """``rewrite name: op(params) -> out => { stages }``."""

    name: str
    op: str
    params: tuple[str, ...] = attrs.field(converter=tuple)
    output: str
    stages: tuple[Stage, ...] = attrs.field(converter=tuple)
    loc: SourceLocation | None = attrs.field(default=None, eq=False)

    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """The block of stages, if ``spec`` is a non-accumulating application of ``op``."""
        if spec.op != self.op or spec.accum:
            return
        names = (*self.params, self.output)
        stages: list[Spec] = []
        maps: list[tuple[int, ...]] = []
        for st in self.stages:
            idxs = tuple(names.index(n) for n in (*st.args, st.target))
            operands: Sequence[TensorSpec] = [spec.operands[i] for i in idxs]
            stage_def = ctx.ruleset.ops[st.op]
            if not isinstance(stage_def.sizes([t.shape for t in operands]), dict):
                return
            stages.append(Spec(st.op, tuple(operands), st.accum, spec.limits, spec.serial))
            maps.append(idxs)
        yield BlockAction(self.name, tuple(stages), tuple(maps))


Rule = SchemaRule | DecomposeRule
