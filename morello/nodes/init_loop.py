"""A reduction loop whose first step initializes the output and whose later steps accumulate.

A Spec that does not accumulate (``c = matmul(a, b)``) may be split along a reduction index
this way instead of filling its output with the reduction's identity and then accumulating
over every step (``to_accum`` then ``split``): the first step is the non-accumulating Spec
over its slice of the reduction, which can start its accumulators from the identity in
registers, and the output is never filled through memory. Over main memory that fill is a
whole pass over the output, and the first step's loads of it are gone too.

Cost: the first step, the accumulating body for each later trip, the tail once, and the terms
a serial loop adds (``LoopAction``: the latency of dependency chains over register
accumulators, the streams a loop across runs starts again, the cache fills later trips do not
repeat, the reads an unrolled loop's repeats share with its first step). Peak memory: the
most any child needs. C: the first step at the start of the index, then a ``for`` loop over
the other trips (or the steps repeated, when an operand the index runs along lives in
registers), then the tail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

import morello.nodes.copy_ahead as ahead
from morello.codegen.c import Lin, shift_views
from morello.cost import combine, less_accesses, loop_fills
from morello.nodes.base import NodeBase
from morello.nodes.loop import LoopAction

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl
    from morello.nodes.base import Copy
    from morello.spec import Spec


@attrs.frozen
class InitLoopAction(NodeBase):
    """A loop over reduction index ``var`` in ``trips`` steps of ``step`` (at least two), the
    first of which is ``first`` (the Spec's own, non-accumulating form over one step); the
    others are ``body`` (its accumulating form), and ``tail``, if any, accumulates the last
    ``extent % step`` indices."""

    rule: str
    var: str
    step: int
    trips: int
    first: Spec
    body: Spec
    tail: Spec | None

    @property
    def children(self) -> tuple[Spec, ...]:
        """Sub-Specs: the first step, the body, then the tail."""
        head = (self.first, self.body)
        return head if self.tail is None else (*head, self.tail)

    def describe(self) -> str:
        """One-line description."""
        tail = " + tail" if self.tail is not None else ""
        return f"{self.rule}: for {self.var} in {self.trips} x {self.step}{tail}, first initializes"

    def decision(self) -> tuple[Any, ...]:
        """The same loop at any Spec: rule, index variable, step."""
        return ("init_loop", self.rule, self.var, self.step)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """What the serial loop of the body would cost, with the first trip's body replaced by
        the first step (residencies the steps start with paid once: ``cost.loop_fills``)."""
        loop = LoopAction(self.rule, self.var, self.step, self.trips, self.body, self.tail)
        counts = (1, self.trips - 1, 1)[: len(child_costs)]
        total = combine(spec, child_costs, loop.extra_cost(spec, ctx), ctx, counts)
        total = less_accesses(total, loop.loaded_once(spec, ctx), ctx)
        return loop_fills(
            spec, self.var, counts, child_costs, total, ctx, lambda: loop.read_once(spec, ctx)
        )

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """The first step, a loop (or the steps repeated) over the rest, the tail.

        When the first step and the body copy the same input tile into a new buffer (a packed
        panel), each step copies the next step's tile ahead (``morello.nodes.copy_ahead``).
        """
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        first, body = impl.children[0], impl.children[1]
        tail = impl.children[2] if self.tail is not None else None

        def at(offset: Lin | int) -> list[View]:
            return shift_views(views, uses, offset)

        unroll = any(views[i].buffer.kind == "registers" for i, _ in uses)
        copies = None if unroll else self._copies(em, first, body, views, uses)
        if copies is None or not em.attempt(lambda: self._emit_copying_ahead(em, *copies, at)):
            em.node(first, list(views))
            if unroll or self.trips == 2:
                for t in range(1, self.trips):
                    em.node(body, at(t * self.step))
            else:
                var = em.names.fresh("i")
                em.for_loop(
                    var, 1, self.trips, lambda: em.node(body, at(Lin.var(var).scale(self.step)))
                )
        if tail is not None:
            em.node(tail, at(self.trips * self.step))

    @staticmethod
    def _copies(
        em: Emitter, first: Impl, body: Impl, views: list[View], uses: Sequence[tuple[int, int]]
    ) -> tuple[Copy, Copy] | None:
        """The copies the first step and the body start with, if they copy the same tile ahead."""
        body_copy = ahead.copy_ahead(em, body, views, uses)
        first_copy = first.action.copy_in(first)
        if body_copy is None or first_copy is None or first.threads() > 1:
            return None
        if (first_copy.operand, first_copy.dest) != (body_copy.operand, body_copy.dest):
            return None
        return first_copy, body_copy

    def _emit_copying_ahead(
        self, em: Emitter, first: Copy, body: Copy, at: Callable[[Lin | int], list[View]]
    ) -> bool:
        """Two buffers; the first step copies the second step's tile, each later step the
        next one's (the body's copy, in pieces). Whether a step's loop took the pieces."""
        op = first.operand
        buffers = ahead.panels(em, first, at(0)[op])
        todo = (buffers[1], at(self.step)[op], body.prologue, lambda rows: "0")
        placed = ahead.trip(em, first, at(0), buffers[0], todo)
        if self.trips == 2:
            ahead.trip(em, body, at(self.step), buffers[1], None)
            return placed
        later = ahead.later_trips(em, body, at, self.step, 1, self.trips, buffers)
        return placed or later
