"""A move: an operand brought into another level, as a new buffer or as a cache residency.

A move into an addressed level (or a packed copy into a cache) makes a new buffer with a
prologue copying the operand in (if the Spec reads it) and an epilogue copying it back (if
the Spec writes it). A move into a cache makes no buffer: it only records that the tile is
resident, and lowers the limits of the level. Cost: a new buffer costs its prologue and
epilogue, whose kernels already pay for every access; a cache residency costs the lines it
touches at both levels, and so does an input small enough to fold into the kernels that
read it (``MemoryLevel.folds``). C: the buffer's declaration, the copies, the body over the buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.codegen.c import Lin, View, on_heap
from morello.cost import (
    access_cost,
    combine,
    fills,
    iteration_points,
    operand_lines,
    with_fills,
)
from morello.nodes.base import Copy, NodeBase, max_peaks
from morello.spec import Spec, TensorSpec, add_peak, memory_units

if TYPE_CHECKING:
    from morello.codegen.c import Emitter
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class MoveAction(NodeBase):
    """Operand ``operand`` moved to ``dest`` (a new buffer, or a cache residency).

    ``layout`` names the layout family chosen for a new buffer (None for a cache).
    """

    rule: str
    operand: int
    dest: TensorSpec
    layout: str | None
    new_buffer: bool
    prologue: Spec | None
    body: Spec
    epilogue: Spec | None

    @property
    def children(self) -> tuple[Spec, ...]:
        """Prologue (if any), body, epilogue (if any)."""
        out = [self.body]
        if self.prologue is not None:
            out.insert(0, self.prologue)
        if self.epilogue is not None:
            out.append(self.epilogue)
        return tuple(out)

    def describe(self) -> str:
        """One-line description."""
        note = "" if self.new_buffer else " (cached, no copy)"
        return f"{self.rule}: operand {self.operand} -> {self.dest.describe()}{note}"

    def decision(self) -> tuple[Any, ...]:
        """The same move at any Spec: operand, level, layout family, vector size."""
        d = self.dest
        return ("move", self.rule, self.operand, d.level.name, self.layout, d.vector_size or 0)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """A new buffer: its copies (already priced by their kernels). A cache: the lines.

        Either carries the residencies at the top of its body (``Cost.fills``), and a cache
        adds its own, so that a loop around pays them once (``cost.loop_fills``).

        An input small enough to fold (``MemoryLevel.folds``) is read by the instructions of
        the kernels that use it, not loaded by one of its own: its copy costs only the lines
        it touches at both levels, as a cache residency does, not its kernel's instruction.
        """
        src = spec.operands[self.operand]
        inner = fills(child_costs[0 if self.prologue is None else 1])
        if not self.new_buffer:
            lines = access_cost(src, ctx) + access_cost(self.dest, ctx)
            got = [*inner, *(0,) * (len(spec.operands) - len(inner))]
            got[self.operand] += lines
            return with_fills(combine(spec, child_costs, lines, ctx), got)
        if self.folds():
            total = combine(spec, [operand_lines((src, self.dest), ctx), *child_costs[1:]], 0, ctx)
        else:
            total = combine(spec, child_costs, 0, ctx)
        if not inner:  # on the search's hot path: usually none
            return total
        # The body's residencies of this operand are of the new buffer.
        return with_fills(total, [0 if i == self.operand else f for i, f in enumerate(inner)])

    def folds(self) -> bool:
        """Whether this is a copy of an input into a level small enough to fold into the
        instructions that read it (``MemoryLevel.folds``)."""
        level = self.dest.level
        return (
            self.prologue is not None
            and self.epilogue is None
            and level.folds > 0
            and memory_units(self.dest, level) <= level.folds
        )

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The children's peaks plus the destination, rounded as limits are.

        A move of ``u`` units over a child that needs ``r`` needs ``snap_up(u + r)``, because
        the move leaves its child ``snap_down(limit - u)`` (``spec.add_peak``).
        """
        peak = list(max_peaks(child_peaks, len(ctx.target.levels)))
        idx = ctx.target.level_index(self.dest.level)
        add_peak(ctx.target, peak, idx, memory_units(self.dest, self.dest.level))
        return tuple(peak)

    def headers(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """``<stdlib.h>`` for a buffer too large for the stack."""
        if self.new_buffer and not self.dest.level.counts_registers and on_heap(self.dest):
            return ("<stdlib.h>",)
        return ()

    def copy_in(self, impl: Impl) -> Copy | None:
        """A copy of an input into a new buffer in memory on the stack (no copy out)."""
        dest = self.dest
        if (
            not self.new_buffer
            or self.prologue is None
            or self.epilogue is not None
            or dest.level.counts_registers
            or on_heap(dest)
        ):
            return None
        return Copy(self.operand, dest, impl.children[0], impl.children[1])

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """Declare the buffer, copy in, the body over it, copy out (a cache: the body only)."""
        if not self.new_buffer:
            em.node(impl.children[0], views)
            return
        dest = self.dest
        buf = em.declare(dest)
        view = View(buf, tuple(Lin() for _ in dest.shape))
        body_views = list(views)
        body_views[self.operand] = view
        children = list(impl.children)
        if self.prologue is not None:
            em.node(children.pop(0), [views[self.operand], view])
            if buf.kind == "registers" and buf.lanes and self._reused(em.ctx):
                _pin(em, dest, buf.name)
        em.node(children.pop(0), body_views)
        if self.epilogue is not None:
            em.node(children.pop(0), [view, views[self.operand]])
        if buf.kind == "memory" and on_heap(dest):
            em.emit(f"free({buf.name});")

    def _reused(self, ctx: SynthesisContext) -> bool:
        """Whether the body reads each moved element more than once: its iteration space
        has more points than the destination has elements."""
        return iteration_points(self.body, ctx) > self.dest.volume


def _pin(em: Emitter, dest: TensorSpec, name: str) -> None:
    """Hold each register variable of a new vector buffer in a register (``VectorType.pin``)."""
    vt = em.ctx.target.vector_type(dest.dtype, dest.vector_size)
    if vt is None or not vt.pin:
        return
    for i in range(dest.volume // dest.vector_size):
        em.emit(vt.pin.format(v=f"{name}_{i}"))
