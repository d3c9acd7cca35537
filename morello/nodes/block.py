"""A block: sub-Specs run in sequence, each over some of the parent's operands.

Cost: the sum of the stages. C: each stage in order, over the views its operand map picks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.nodes.base import NodeBase
from morello.spec import Spec

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class BlockAction(NodeBase):
    """Sub-Specs run in sequence; ``operand_maps[i]`` picks each stage's operands."""

    rule: str
    stages: tuple[Spec, ...]
    operand_maps: tuple[tuple[int, ...], ...]

    @property
    def children(self) -> tuple[Spec, ...]:
        """The stages, in order."""
        return self.stages

    def describe(self) -> str:
        """One-line description."""
        return f"{self.rule}: block of {len(self.stages)}"

    def decision(self) -> tuple[Any, ...]:
        """The same decomposition at any Spec: its rule."""
        return ("block", self.rule)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """The stages' costs added up."""
        return sum(child_costs)

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """Each stage in order."""
        for child, idxs in zip(impl.children, self.operand_maps, strict=True):
            em.node(child, [views[i] for i in idxs])
