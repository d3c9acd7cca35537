"""Residency: a Spec's whole working set held in an outer cache that caches it implicitly.

An outer cache such as a 512 KiB L2 is not a place a program chooses for one operand: the
hardware keeps whatever was touched recently, so a Spec whose operands together fit in it
reads them from memory once and from the cache afterwards. A level marked
``MemoryLevel.whole_specs`` is modelled that way. When every operand of a Spec that lives in
a level moving into it fits at once, the ``reside`` schema moves them all there together
(no buffer, no copy), and that action is *forced*: it is the only one offered for the Spec
(``forced``), because a program cannot opt out of a cache.

Cost: the first touch of each line is paid at the source level's price and every later
touch at the cache's, so the node charges each operand's lines at the difference of the two
prices; its body then pays the cache's price for every access, the first included. A Spec
that reads its data once thus costs what it did without the cache, and one that reads it
again pays the cache's price for the repeats. The body's limit at the cache level is 0:
nothing more is moved there. C: the body's, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.cost import access_cost
from morello.nodes.base import NodeBase, max_peaks
from morello.spec import Spec, memory_units, snap_up

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class ResideAction(NodeBase):
    """Operands ``operands`` of a Spec held together in the cache level ``level``."""

    rule: str
    level: str
    operands: tuple[int, ...]
    body: Spec

    #: The only action offered for a Spec it applies to (see the module's docstring).
    forced = True

    @property
    def children(self) -> tuple[Spec, ...]:
        """The body: the same goal with the operands resident."""
        return (self.body,)

    def describe(self) -> str:
        """One-line description."""
        which = ", ".join(map(str, self.operands))
        return f"{self.rule}: operands {which} resident in {self.level} (cached, no copy)"

    def decision(self) -> tuple[Any, ...]:
        """The same residency at any Spec (which operands follows from the Spec)."""
        return ("reside", self.rule, self.level)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """The first touch of every resident line at the difference of the two prices."""
        fill = 0
        for i in self.operands:
            src, dest = spec.operands[i], self.body.operands[i]
            fill += max(0, access_cost(src, ctx) - access_cost(dest, ctx))
        return fill + sum(child_costs)

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The body's peaks, and at the cache the lines of every resident operand."""
        peak = list(max_peaks(child_peaks, len(ctx.target.levels)))
        idx = ctx.target.level_index(self.level)
        lv = ctx.target.levels[idx]
        units = sum(
            memory_units(self.body.operands[i], lv, ctx.dtype(spec.operands[i].dtype).size)
            for i in self.operands
        )
        peak[idx] = snap_up(peak[idx] + units)
        return tuple(peak)

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """The body over the same buffers: residency makes no code."""
        em.node(impl.children[0], views)
