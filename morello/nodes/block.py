"""A block: sub-Specs run in sequence, each over some of the parent's operands and the
block's temporaries.

A temporary is a new buffer the block declares for its whole length (a decomposition's
intermediate, e.g. ``t = matmul(a, b); c = move(t)``), at a level, layout and vector size
the search chose. Cost: the sum of the stages (their kernels pay for every access, as with a
move's copies). Peak memory: the stages' most, plus the temporaries, rounded as limits are.
C: the temporaries' declarations, then each stage in order over the views its operand map
picks (the parent's operands first, then the temporaries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.codegen.c import Lin, View, on_heap
from morello.cost import combine
from morello.nodes.base import NodeBase, max_peaks
from morello.spec import Spec, TensorSpec, add_peak, memory_units

if TYPE_CHECKING:
    from morello.codegen.c import Emitter
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class BlockAction(NodeBase):
    """Sub-Specs run in sequence; ``operand_maps[i]`` picks each stage's operands.

    Indices below the parent's operand count name its operands; the rest name
    ``temporaries`` in order, each a (layout family name, TensorSpec) pair.
    """

    rule: str
    stages: tuple[Spec, ...]
    operand_maps: tuple[tuple[int, ...], ...]
    temporaries: tuple[tuple[str | None, TensorSpec], ...] = ()

    @property
    def children(self) -> tuple[Spec, ...]:
        """The stages, in order."""
        return self.stages

    def describe(self) -> str:
        """One-line description."""
        temps = "".join(f", temporary {ts.describe()}" for _, ts in self.temporaries)
        return f"{self.rule}: block of {len(self.stages)}{temps}"

    def decision(self) -> tuple[Any, ...]:
        """The same decomposition at any Spec: its rule, and where each temporary lives."""
        if not self.temporaries:
            return ("block", self.rule)
        places = tuple((ts.level.name, name, ts.vector_size or 0) for name, ts in self.temporaries)
        return ("block", self.rule, places)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """The stages' costs added up (by resource inside a register tile)."""
        return combine(spec, child_costs, 0, ctx)

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The stages' most, plus each temporary (rounded as a move's destination is)."""
        peak = list(max_peaks(child_peaks, len(ctx.target.levels)))
        for _, ts in reversed(self.temporaries):
            idx = ctx.target.level_index(ts.level)
            add_peak(ctx.target, peak, idx, memory_units(ts, ts.level))
        return tuple(peak)

    def stage_views(self, stage: int, views: list[View]) -> list[View]:
        """The parent's operands as stage ``stage`` reads them: as they are."""
        return views

    def headers(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """``<stdlib.h>`` for a temporary too large for the stack."""
        for _, ts in self.temporaries:
            if not ts.level.counts_registers and on_heap(ts):
                return ("<stdlib.h>",)
        return ()

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """Declare the temporaries, then each stage in order."""
        bufs = [em.declare(ts) for _, ts in self.temporaries]
        temps = [View(b, tuple(Lin() for _ in b.shape)) for b in bufs]
        for n, (child, idxs) in enumerate(zip(impl.children, self.operand_maps, strict=True)):
            everything = [*self.stage_views(n, views), *temps]
            em.node(child, [everything[i] for i in idxs])
        for (_, ts), buf in zip(self.temporaries, bufs, strict=True):
            if buf.kind == "memory" and on_heap(ts):
                em.emit(f"free({buf.name});")
