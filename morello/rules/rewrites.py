"""The rewrite rules of rule files: schema rules and decompositions.

A schema rule (``rewrite tile_out for * sizes pow2_3``) names a registered schema
(``schemas.py`` holds the built-ins; plugins add more) and the ops, sizes and layouts it
applies with; the schema makes the actions. A decomposition (``pattern => { stages }``, e.g.
zero-then-accumulate) is a block of sub-Specs. Knows no op by name: ops are looked up in the
rule set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from morello.errors import SourceLocation
from morello.impl import Action
from morello.nodes import BlockAction
from morello.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from morello.context import SynthesisContext


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
        """Every action this rule offers for ``spec``, in a fixed order (its schema's)."""
        if not any(p.matches(spec) for p in self.patterns):
            return
        yield from ctx.schemas[self.schema].actions(self, spec, ctx)


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
