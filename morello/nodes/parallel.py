"""A parallel loop: the steps of an output index shared among threads (OpenMP).

Only a Spec that may run in parallel (``Spec.serial`` false) has one, over an index of its
output (never a reduction: the steps write disjoint tiles, so no two threads touch the same
element), and its body and tail must be serial, so that parallel regions never nest.

Cost: the trips are shared among ``min(trips, threads)`` threads, each running
``ceil(trips / threads)`` of them, so the loop costs what a serial loop of that many trips
costs (``LoopAction``: the body per trip, the streams it starts again), plus the tail once
(after the loop, on one thread), plus the target's ``fork_join`` coefficient for starting the
threads and waiting for the last.

Peak memory: every level but the first is per core (caches and registers: each thread has
its own), so the body needs there what it needs alone. The first level (main memory) is
shared: the buffers each running body allocates there add up, so the loop needs ``threads``
times the body's, and the body is searched under that share of the limit; unless the level
bounds each buffer on its own (``MemoryLevel.per_buffer``, main memory on every target
here), where the body's buffers only have to fit, as they do in a serial loop.

C: ``#pragma omp parallel for num_threads(T) schedule(static)`` over a ``for`` loop. What
the body declares (buffers, registers, inner loop variables) is inside the loop's block and
so private to its thread; the loop variable is private to OpenMP's loop; the operands are
the parent's views, whose inputs are only read and whose output tiles differ per trip. The
tail follows the loop. The C must be compiled with the target's ``openmp_flags``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.codegen.c import Lin, shift_views
from morello.nodes.base import NodeBase, max_peaks
from morello.nodes.loop import LoopAction
from morello.spec import Spec, snap_up

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class ParallelLoopAction(NodeBase):
    """A loop over output index ``var`` in steps of ``step``, its trips run on threads.

    ``threads`` is the most threads the search may use (``SynthesisContext.threads``); the
    loop runs on ``workers`` of them. ``body`` is the (serial) Spec of one step, under its
    thread's share of the first level's limit; ``tail``, if any, handles the last
    ``extent % step`` indices once after the loop.
    """

    rule: str
    var: str
    step: int
    trips: int
    threads: int
    body: Spec
    tail: Spec | None

    @property
    def workers(self) -> int:
        """Threads the loop runs on: no more than it has trips."""
        return min(self.trips, self.threads)

    @property
    def trips_per_thread(self) -> int:
        """Trips of the busiest thread."""
        return -(-self.trips // self.workers)

    @property
    def children(self) -> tuple[Spec, ...]:
        """Sub-Specs: body, then tail."""
        return (self.body,) if self.tail is None else (self.body, self.tail)

    def describe(self) -> str:
        """One-line description."""
        tail = " + tail" if self.tail is not None else ""
        return (
            f"{self.rule}: parallel for {self.var} in {self.trips} x {self.step}{tail} "
            f"on {self.workers} threads"
        )

    def decision(self) -> tuple[Any, ...]:
        """The same loop at any Spec: rule, index variable, step (threads are in the key)."""
        return ("parallel", self.rule, self.var, self.step)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """A serial loop of the busiest thread's trips, the tail, and the fork/join."""
        busiest = LoopAction(
            self.rule, self.var, self.step, self.trips_per_thread, self.body, self.tail
        )
        return busiest.cost(spec, child_costs, ctx) + ctx.coefficients.fork_join

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """Per-core levels as the children need; the shared first level times the workers
        (unless it bounds each buffer on its own: ``MemoryLevel.per_buffer``)."""
        body = list(child_peaks[0])
        if not ctx.target.levels[0].per_buffer:
            body[0] = snap_up(body[0] * self.workers)
        return max_peaks([tuple(body), *child_peaks[1:]], len(ctx.target.levels))

    def parallelism(self) -> int:
        """The threads the loop runs on."""
        return self.workers

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """The OpenMP pragma, a ``for`` loop shifting the views the index runs along, the tail."""
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        var = em.names.fresh("i")
        em.emit(f"#pragma omp parallel for num_threads({self.workers}) schedule(static)")
        em.emit(f"for (int {var} = 0; {var} < {self.trips}; {var}++) {{")
        em.depth += 1
        em.node(impl.children[0], shift_views(views, uses, Lin.var(var).scale(self.step)))
        em.depth -= 1
        em.emit("}")
        if self.tail is not None:
            em.node(impl.children[1], shift_views(views, uses, self.trips * self.step))
