"""The rewrite rules of rule files: schema rules and decompositions.

A schema rule (``rewrite tile_out for * sizes pow2_3``) names a registered schema
(``schemas.py`` holds the built-ins; plugins add more) and the ops, sizes and layouts it
applies with; the schema makes the actions. A decomposition (``pattern => { stages }``, e.g.
zero-then-accumulate) is a block of sub-Specs. Knows no op by name: ops are looked up in the
rule set.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from morello.errors import SourceLocation
from morello.impl import Action
from morello.layout import family_name
from morello.nodes import BlockAction
from morello.rules.graph import GRAPH_PATTERN, is_graph
from morello.rules.index_notation import base_name
from morello.rules.schemas import LEVEL_KINDS, serial_over, temp_buffers
from morello.spec import EVERY_LEVEL, Spec, TensorSpec, memory_units, short_of, subtract_limits

if TYPE_CHECKING:
    from morello.context import SynthesisContext


@attrs.frozen
class OpPattern:
    """``matmul``, ``accum matmul``, ``*``, ``accum *``, or ``graph`` (any graph of ops)."""

    op: str
    accum_only: bool = False

    def matches(self, spec: Spec) -> bool:
        """Whether a Spec's op (and accumulation) fits."""
        return self.matches_op(spec.op, spec.accum)

    def matches_op(self, op: str, accum: bool) -> bool:
        """Whether Specs of ``op``, accumulating or not, fit."""
        if self.accum_only and not accum:
            return False
        if self.op == GRAPH_PATTERN:
            return is_graph(op)
        return self.op == "*" or self.op == base_name(op)


@attrs.frozen
class SchemaRule:
    """``rewrite <schema> for <ops> [sizes pow2|all] [layouts ...] [into <kinds>]
    [operands all|inputs]``."""

    schema: str
    patterns: tuple[OpPattern, ...] = attrs.field(converter=tuple)
    sizes: str = "pow2"
    layouts: tuple[str, ...] = attrs.field(default=("*",), converter=tuple)
    loc: SourceLocation | None = attrs.field(default=None, eq=False)
    #: The kinds of level a move may bring operands into (all by default).
    into: tuple[str, ...] = attrs.field(default=LEVEL_KINDS, converter=tuple)
    #: Which operands a move may move: ``all``, or ``inputs`` (not the output).
    operands: str = "all"

    @property
    def name(self) -> str:
        """Rules are named after their schema."""
        return self.schema

    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """Every action this rule offers for ``spec``, in a fixed order (its schema's)."""
        if not any(p.matches(spec) for p in self.patterns):
            return
        schema = ctx.schemas[self.schema]
        if not getattr(schema, "reports_room", False):
            short_of(EVERY_LEVEL, 0)  # it may leave actions out for want of room unsaid
        yield from schema.actions(self, spec, ctx)

    def actions_making(
        self, spec: Spec, ctx: SynthesisContext, decision: tuple[Any, ...]
    ) -> Iterator[Action]:
        """The actions of ``actions`` that could make ``decision``, or more (all of them,
        unless the schema knows how to narrow them down: its own ``actions_making``)."""
        if not any(p.matches(spec) for p in self.patterns):
            return
        schema = ctx.schemas[self.schema]
        narrow = getattr(schema, "actions_making", None)
        if narrow is None:
            yield from schema.actions(self, spec, ctx)
        else:
            yield from narrow(self, spec, ctx, decision)


@attrs.frozen
class Stage:
    """One statement of a decomposition body: ``target (=|+=) op(args)``."""

    target: str
    accum: bool
    op: str
    args: tuple[str, ...] = attrs.field(converter=tuple)


@attrs.frozen
class DecomposeRule:
    """``rewrite name: op(params) -> out => { stages }``.

    A stage may assign a name that is not in the pattern: a *temporary*, which later stages
    read. Its shape follows from the stage's op and the operands already known, its dtype is
    the pattern output's, and the search picks where it lives as it does for a move: every
    addressed level of the target, in each layout and vector size a new buffer there may
    have (register levels only with ``in registers``). The block then holds the temporaries
    for its whole length (lowering the limits of every stage).
    """

    name: str
    op: str
    params: tuple[str, ...] = attrs.field(converter=tuple)
    output: str
    stages: tuple[Stage, ...] = attrs.field(converter=tuple)
    loc: SourceLocation | None = attrs.field(default=None, eq=False)
    #: ``in registers``: temporaries only in register levels.
    registers_only: bool = False

    @property
    def temporaries(self) -> tuple[str, ...]:
        """Names the stages assign that the pattern does not name, in order of assignment."""
        known = {*self.params, self.output}
        out: list[str] = []
        for st in self.stages:
            if st.target not in known and st.target not in out:
                out.append(st.target)
        return tuple(out)

    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        """A block of the stages per placement of the temporaries, for a non-accumulating
        application of ``op``; stages that would repeat ``spec`` itself are not offered."""
        if spec.op != self.op or spec.accum:
            return
        shapes = self._temp_shapes(spec, ctx)
        if shapes is None:
            return
        names = (*self.params, self.output, *self.temporaries)
        # A temporary is laid out like the output (row-major for a row-major output), at
        # every addressed level: other layouts multiplied the Specs to search and won nothing.
        out = spec.output
        family = family_name(out.layout, out.shape)
        layouts = ("*",) if family is None else (family,)
        choices = [
            temp_buffers(
                TensorSpec(shape, out.dtype, out.level, out.layout),
                ctx,
                layouts,
                registers_only=self.registers_only,
            )
            for shape in shapes
        ]
        for placed in itertools.product(*choices):
            limits: tuple[int, ...] | None = spec.limits
            for _, ts in placed:
                idx = ctx.target.level_index(ts.level)
                units = memory_units(ts, ts.level)
                limits = subtract_limits(ctx.target, limits, idx, units)
                if limits is None:
                    break
            if limits is None:
                continue
            tensors = (*spec.operands, *(ts for _, ts in placed))
            serial = serial_over(spec, (ts for _, ts in placed), ctx)
            stages: list[Spec] = []
            maps: list[tuple[int, ...]] = []
            for st in self.stages:
                idxs = tuple(names.index(n) for n in (*st.args, st.target))
                operands = tuple(tensors[i] for i in idxs)
                stages.append(Spec(st.op, operands, st.accum, limits, serial))
                maps.append(idxs)
            if any(_same_goal(stage, spec) for stage in stages):
                continue
            yield BlockAction(self.name, tuple(stages), tuple(maps), tuple(placed))

    def _temp_shapes(self, spec: Spec, ctx: SynthesisContext) -> list[tuple[int, ...]] | None:
        """Each temporary's shape (from the stage assigning it), or None if one is unbound
        or the operands' shapes disagree with a stage's op."""
        shapes = self._shapes(
            ctx.ruleset.ops,
            dict(zip((*self.params, self.output), (t.shape for t in spec.operands), strict=True)),
        )
        return None if shapes is None else [shapes[t] for t in self.temporaries]

    def _shapes(
        self, ops: Mapping[str, Any], shapes: dict[str, tuple[int, ...]]
    ) -> dict[str, tuple[int, ...]] | None:
        """``shapes`` (the pattern's names) completed with each temporary's, from the stage
        assigning it; None if one is unbound or the operands' shapes disagree with a
        stage's op."""
        for st in self.stages:
            stage_def = ops[st.op]
            ins = [shapes.get(a) for a in st.args]
            if any(s is None for s in ins):
                return None
            sizes: dict[str, int] = {}
            for acc, shape in zip(stage_def.inputs, ins, strict=True):
                assert shape is not None
                for ix, n in zip(acc.indices, shape, strict=True):
                    if sizes.setdefault(ix, n) != n:
                        return None
            if st.target not in shapes:
                if any(ix not in sizes for ix in stage_def.output.indices):
                    return None
                shapes[st.target] = stage_def.operand_shape(len(stage_def.inputs), sizes)
            elif not isinstance(
                stage_def.sizes([*(s for s in ins if s is not None), shapes[st.target]]), dict
            ):
                return None
        return shapes

    def value_mismatch(self, ops: Mapping[str, Any]) -> str | None:
        """Why the stages do not compute the op, judged on random inputs; None if they do.

        ``ops`` maps the op and stage keys (as resolved) to their ``OpDef``. Every index of
        the op gets its own size (2, 3, 4, ...) and each stage is evaluated with its op's
        NumPy reference in float64 (``c += op(...)`` combining by the op's combiner). The
        inputs are standard normal values, then the same shifted down by 4, mostly negative
        (a maximum that starts from 0 instead of -inf shows only there). The output starts
        as NaN, so a stage that reads it before a stage writes it shows. Results must agree
        to 1e-9, relative: far tighter than any rounding the stages' order could make in
        float64, far looser than a wrong stage misses by. A rewrite whose stages cannot be
        shaped for these sizes is not judged (it applies to no Spec of them either).
        """
        import numpy as np

        opdef = ops[self.op]
        sizes = {ix: 2 + n for n, ix in enumerate(opdef.index_vars)}
        rng = np.random.default_rng(0)
        drawn = [
            rng.standard_normal(opdef.operand_shape(i, sizes)) for i in range(len(self.params))
        ]
        out_shape = opdef.operand_shape(len(self.params), sizes)
        for shift in (0.0, -4.0):
            inputs = [x + shift for x in drawn]
            want = opdef.reference(inputs, np.zeros(out_shape))
            got = self._evaluate(ops, dict(zip(self.params, inputs, strict=True)), out_shape)
            if got is None:
                return None
            close = np.isclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
            if close.all():
                continue
            bad = tuple(int(i) for i in np.argwhere(~close)[0])
            dims = ", ".join(f"{ix}={n}" for ix, n in sizes.items())
            shifted = "" if shift == 0 else f", shifted by {shift:g}"
            return (
                f"its stages do not compute {base_name(self.op)}: on standard normal inputs "
                f"({dims}{shifted}) they give {float(got[bad]):.6g} at {list(bad)}, where "
                f"{base_name(self.op)} gives {float(want[bad]):.6g}"
            )
        return None

    def _evaluate(
        self, ops: Mapping[str, Any], env: dict[str, Any], out_shape: tuple[int, ...]
    ) -> Any:
        """The output the stages compute from the inputs in ``env`` (see ``value_mismatch``),
        or None if a temporary's shape is unbound or a stage's operands disagree on one."""
        import numpy as np

        known = {name: x.shape for name, x in env.items()}
        shapes = self._shapes(ops, {**known, self.output: out_shape})
        if shapes is None:
            return None
        env[self.output] = np.full(out_shape, np.nan)
        for st in self.stages:
            target = env[st.target] if st.target in env else np.zeros(shapes[st.target])
            args = [env[a] for a in st.args]
            env[st.target] = ops[st.op].reference(args, target, accum=st.accum)
        return env[self.output]


def _same_goal(a: Spec, b: Spec) -> bool:
    return a.op == b.op and a.operands == b.operands and a.accum == b.accum


Rule = SchemaRule | DecomposeRule
