"""A serial loop over one index variable in fixed steps, with a tail for the remainder.

Cost: trips times the body, plus the tail once, plus three terms the affine model adds for
loops: the latency of the dependency chains a reduction loop over register accumulators
makes, the streams a loop across runs of a read-once operand starts again, and the streams
it keeps from running concurrently when it takes them in long bursts (see
``CostCoefficients``); less the fills of a whole-Spec cache that trips after the first do not
repeat (``morello.nodes.reside.loop_reuse``) and the residencies its steps start with that they
do not repeat (``morello.cost.loop_fills``), and, in a loop written out unrolled, the reads
of inputs it does not run along after the first trip's (``LoopAction.loaded_once``). C: a
``for`` loop, or the body repeated when an operand the index runs along lives in registers
(registers cannot be indexed); two such loops, a reduction around a loop over outputs, are
repeated the other way round where that reads a streamed operand's rows in turn
(``LoopAction._rows_in_turn``). A loop whose body packs an input copies the next trip's tile
ahead (``morello.nodes.copy_ahead``), across a nest of two loops over the one index as one
loop (``_emit_nest_copying_ahead``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

import morello.nodes.copy_ahead as ahead
from morello.codegen.c import Lin, offset_step, shift_views
from morello.cost import (
    Cost,
    combine,
    iteration_points,
    less_accesses,
    lines_and_runs,
    loop_fills,
)
from morello.nodes.base import NodeBase
from morello.nodes.reside import loop_reuse
from morello.spec import Spec, memory_units

if TYPE_CHECKING:
    from collections.abc import Callable

    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl
    from morello.nodes.base import Copy
    from morello.spec import TensorSpec


@attrs.frozen
class LoopAction(NodeBase):
    """A serial loop over index variable ``var`` in steps of ``step``.

    ``body`` is the Spec of one full step; ``tail``, if any, handles the last
    ``extent % step`` indices once after the loop.
    """

    rule: str
    var: str
    step: int
    trips: int
    body: Spec
    tail: Spec | None

    @property
    def children(self) -> tuple[Spec, ...]:
        """Sub-Specs: body, then tail."""
        return (self.body,) if self.tail is None else (self.body, self.tail)

    @property
    def counts(self) -> tuple[int, ...]:
        """How often each child runs, in child order: the body ``trips`` times, the tail once."""
        return (self.trips,) if self.tail is None else (self.trips, 1)

    def describe(self) -> str:
        """One-line description."""
        tail = " + tail" if self.tail is not None else ""
        return f"{self.rule}: for {self.var} in {self.trips} x {self.step}{tail}"

    def decision(self) -> tuple[Any, ...]:
        """The same loop at any Spec: rule, index variable, step."""
        return ("loop", self.rule, self.var, self.step)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """Trips times the body, the tail once, chain latency and what walking streams adds
        (``extra_cost``), less the cache fills that later trips do not repeat (those of a
        whole-Spec cache, and the residencies its steps start with: ``cost.loop_fills``).

        Where the target declares a ``chain`` resource, a reduction loop over register
        accumulators charges it the chain latency for each trip instead: every trip waits
        for the previous one's sums, however many accumulators share the wait, and the
        step's cost is then the greater of that wait and its busiest other resource. Only
        the innermost such loop charges it; the loops around it wait through it.
        """
        counts = self.counts
        total = combine(spec, child_costs, self.extra_cost(spec, ctx), ctx, counts)
        total = less_accesses(total, self.loaded_once(spec, ctx), ctx)
        slot = _chain_slot(ctx)
        if slot is not None and isinstance(total, Cost) and self._is_chain(spec, ctx):
            latency = ctx.coefficients.chain_latency[spec.operands[-1].level.name]
            use = list(total.use)
            for count, child in zip(counts, child_costs, strict=True):
                # A step with a reduction loop of its own already waits on these chains.
                if not (isinstance(child, Cost) and child.use and child.use[slot] > 0):
                    use[slot] += count * latency
            total = Cost(total.base, tuple(use))
        return loop_fills(
            spec, self.var, counts, child_costs, total, ctx, lambda: self.read_once(spec, ctx)
        )

    def loaded_once(self, spec: Spec, ctx: SynthesisContext) -> list[tuple[int, TensorSpec]]:
        """The accesses that repeats of an unrolled loop's body do not make again: ``(times,
        tile)`` pairs, one for each input in memory the loop does not run along.

        A loop that runs along an operand in registers is written out as its body repeated
        (``emit``), and in the repeats every input the loop does not run along is read at the
        same addresses as in the first: the compiler loads it once and reuses the value
        (common subexpressions; the function's pointers are ``restrict``, so stores between
        the reads do not stop it). So the trips after the first, and the tail (whose tile of
        such an input is the body's), do not pay for those reads. Measured: a 4x24 register
        tile broadcasting each element of A from L1 in each of its three FMAs compiled (gcc
        -O3) to the same instructions as the one that first loads it into a scalar register,
        yet was priced 20% dearer before this (8x512x512, BENCHMARKS.md). Such a loop is
        offered only where those inputs are in registers already (docs/design-notes.md, "An
        unrolled loop holds what it does not run along"), so what this takes off is the
        exempt ones': a single element, and an input no kernel copies into registers (a
        bf16 vector widened as it is read). The output is not among them: it is written. (A
        body that itself reads an input's lines more than once keeps paying for its own
        repeats; only the tile's single read is taken off, never more than the body paid.)
        """
        repeats = self.trips - 1 + (self.tail is not None)
        return [(repeats, self.body.operands[i]) for i in self.read_once(spec, ctx)]

    def read_once(self, spec: Spec, ctx: SynthesisContext) -> list[int]:
        """The operands whose reads ``loaded_once`` takes off the repeats (their positions)."""
        if self.trips - 1 + (self.tail is not None) == 0:
            return []
        uses = ctx.ruleset.ops[spec.op].operands_using(self.var)
        if not any(spec.operands[i].level.counts_registers for i, _ in uses):
            return []
        along = {i for i, _ in uses}
        return [
            i
            for i, whole in enumerate(spec.operands[:-1])
            if i not in along and not whole.level.counts_registers
        ]

    def _is_chain(self, spec: Spec, ctx: SynthesisContext) -> bool:
        """Whether this loop runs along a reduction of accumulators with a chain latency."""
        out = spec.operands[-1]
        return bool(ctx.coefficients.chain_latency.get(out.level.name, 0)) and (
            self.var in ctx.ruleset.ops[spec.op].reduction_vars
        )

    def extra_cost(self, spec: Spec, ctx: SynthesisContext) -> int:
        """What the loop adds to its trips: chain latency, stream restarts, strided walks and
        long bursts, less the cache fills that later trips do not repeat."""
        extra = self._chain_cost(spec, ctx)
        if ctx.coefficients.stream_hit:
            extra += self._stream_cost(spec, ctx)
        if ctx.coefficients.stream_burst:
            extra += self._burst_cost(spec, ctx)
        if ctx.target.whole_specs_levels:  # on the search's hot path: usually none
            repeats = self.trips - 1 + (self.tail is not None)
            extra -= loop_reuse(spec, self.body, self.var, repeats, ctx)
        return extra

    def _chain_cost(self, spec: Spec, ctx: SynthesisContext) -> int:
        """Latency of the dependency chains a reduction loop over register accumulators makes.

        Each trip waits for the previous trip's sums; the output's registers are independent
        chains that overlap, so the wait per trip is the level's latency over their number.
        """
        if not self._is_chain(spec, ctx):
            return 0
        out = spec.operands[-1]
        if _chain_slot(ctx) is not None and out.level.counts_registers:
            return 0  # the "chain" resource bounds the trips instead (``cost``)
        latency = ctx.coefficients.chain_latency[out.level.name]
        chains = max(1, memory_units(out, out.level))
        return -(-self.trips * latency // chains)

    def _stream_cost(self, spec: Spec, ctx: SynthesisContext) -> int:
        """What walking across an operand's runs adds: streams started again on every trip,
        and short runs read as pieces of a strided walk.

        A step that reads an operand in fewer runs than the loop's tile of it moves to other
        runs on the next trip. If its runs are streams (at least ``stream_lines`` lines,
        priced by ``stream_hit``), every trip starts them anew, and the prefetchers ramp up
        again: ``stream_restart`` per run and trip. Not where the tile itself has no more
        runs than ``stream_hit`` prices together: those streams are tracked as one set, so a
        loop around continues them where it comes back (4x1024x1024's 8 rows of B taken 4 at
        a time in a k loop above its move into L1 compile to the same instructions as the
        move above the loop, which paid nothing, yet were priced 1.97 times as much; both
        ran 104 us). If the step is one shorter run (a piece
        of each row, row after row), it is no stream at all but a piece of a strided walk
        that the prefetchers never follow: its lines cost twice the single run's price its
        tiles were given, and the loop pays the second half, for the tail's piece too. (On
        the shipped defaults that is twice ``level_hit``, a walk's price. It is tied to the
        stream's price rather than to ``level_hit`` so that a walk never costs less than the
        stream it replaces; ``calibration.fit`` keeps a stream no dearer than a strided line.)
        (A step of several short runs is left to the loops inside it, and one with as many
        runs as its tile continues them.)

        Only operands that ``spec`` uses at most ``stream_reuse`` times an element are charged
        (on the default of 1, those it reads once: streamed, as the weights of a matvec); an
        operand the Spec reuses more is mostly served from caches, where the latency hides.
        (A matmul of a few rows reuses its B only inside a register tile or two, and walks
        it from main memory's side much as a matvec does; a target can charge such operands
        too.) For the same reason a copy (a move's Spec, which packs a panel because the
        computation around it reuses the data) pays restarts but not walks: measured,
        charging a panel's pieces as a walk made the search pack 32x2048x512's B in wider
        panels, 5% slower (BENCHMARKS.md).
        ``extra_cost`` calls this only for a target that prices streams.
        """
        coeffs = ctx.coefficients
        points = None  # the size of the Spec's iteration space, computed when first needed
        copy = None  # whether the Spec is a copy (a move), looked up when first needed
        total = 0
        for i, whole in enumerate(spec.operands):
            level = whole.level.name
            if level not in coeffs.stream_hit:  # on the search's hot path: registers, L1
                continue
            whole_runs = None
            for count, child in zip(self.counts, self.children, strict=True):
                step = child.operands[i]
                if step is whole:  # the loop does not move along it (``_retile`` keeps it)
                    continue
                lines, runs = lines_and_runs(step)
                if not coeffs.streams(level, runs, lines // runs):
                    continue
                if whole_runs is None:
                    whole_lines, whole_runs = lines_and_runs(whole)
                if runs >= whole_runs:
                    continue
                if lines // runs >= coeffs.stream_lines:
                    if coeffs.streams(level, whole_runs, whole_lines // whole_runs):
                        continue  # few enough to be tracked together: nothing restarts
                    # Only the trips restart streams: the tail continues the last trip's.
                    per_piece = (
                        runs * coeffs.stream_restart.get(level, 0) if child is self.body else 0
                    )
                else:  # one short run, priced as a stream by the tiles below
                    if copy is None:
                        copy = ctx.ruleset.ops[spec.op].is_identity
                    if copy:
                        continue
                    per_piece = lines * coeffs.line_cost(level, 1, lines)
                if per_piece <= 0:
                    continue
                if points is None:
                    points = iteration_points(spec, ctx)
                if whole.volume * coeffs.stream_reuse < points:
                    break  # reused more often: served from caches
                total += count * per_piece
        return total

    def _burst_cost(self, spec: Spec, ctx: SynthesisContext) -> int:
        """What taking a tile's runs one long burst at a time adds: one stream in flight.

        A cache holds a tile of several runs that the Spec reads once on its way from a
        streamed level (a matvec's rows of weights, 8 at once): the runs are concurrent
        streams, priced by ``stream_hit`` for their number, only while the reader moves from
        run to run often enough. A loop whose trips each read one run of more than
        ``stream_burst`` lines takes the runs one at a time, so its lines pay one stream's
        price less the tile's (BENCHMARKS.md: a Zen 4 read 8 rows 15-20% slower in bursts
        of 24 lines or more than in bursts of 4-16; one row alone as slow). Operands at the
        streamed level itself are ``_stream_cost``'s; reused operands come from the cache.
        """
        coeffs = ctx.coefficients
        points = None  # the size of the Spec's iteration space, computed when first needed
        total = 0
        for i, whole in enumerate(spec.operands[:-1]):
            level = whole.level
            if level.counts_registers or level.name in coeffs.stream_hit:
                continue
            step = self.body.operands[i]
            if step is whole or lines_and_runs(step)[1] != 1:
                continue  # the loop does not move along it, or a trip reads several runs
            whole_lines, whole_runs = lines_and_runs(whole)
            if whole_runs < 2:
                continue
            if points is None:
                points = iteration_points(spec, ctx)
            if whole.volume < points:
                continue
            for count, child in zip(self.counts, self.children, strict=True):
                lines, runs = lines_and_runs(child.operands[i])
                if runs != 1:
                    break
                for source, burst in coeffs.stream_burst.items():
                    if lines > burst and coeffs.streams(
                        source, whole_runs, whole_lines // whole_runs
                    ):
                        prices = coeffs.stream_hit[source]
                        total += count * lines * max(0, prices[0] - prices[whole_runs - 1])
        return total

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """A ``for`` loop shifting the views the index runs along, or the body unrolled.

        A body that copies an input the index runs along into a new buffer (a packed panel)
        is copied one trip ahead: two buffers, the first trip's copy before the loop, and each
        trip's body copies the next trip's tile piece by piece inside its innermost loop, where
        the copies issue among the body's own instructions instead of in a pass of their own.
        """
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        unroll = any(views[i].buffer.kind == "registers" for i, _ in uses)
        body, tail = impl.children[0], impl.children[1] if self.tail is not None else None

        def at(offset: Lin | int) -> list[View]:
            return shift_views(views, uses, offset)

        if self.trips == 1:
            em.node(body, views)
        elif unroll:
            inner = self._rows_in_turn(em, impl, views)
            if inner is None:
                for t in range(self.trips):
                    em.node(body, at(t * self.step))
            else:  # the two unrolled loops interchanged: see ``_rows_in_turn``
                along = em.ctx.ruleset.ops[impl.spec.op].operands_using(inner.var)
                for j in range(inner.trips):
                    for t in range(self.trips):
                        trip = shift_views(at(t * self.step), along, j * inner.step)
                        em.node(body.children[0], trip)
        elif not self._emit_nest_copying_ahead(em, body, views, uses, at):
            copy = ahead.copy_ahead(em, body, views, uses)
            if copy is None or not em.attempt(
                lambda: self._emit_copying_ahead(em, copy, at, self.step, self.trips)
            ):
                var = em.names.fresh("i")
                em.for_loop(
                    var, 0, self.trips, lambda: em.node(body, at(Lin.var(var).scale(self.step)))
                )
        if tail is not None:
            em.node(tail, at(self.trips * self.step))

    def _rows_in_turn(self, em: Emitter, impl: Impl, views: list[View]) -> LoopAction | None:
        """The unrolled loop over outputs directly inside this unrolled reduction loop, when
        emitting the two interchanged reads a streamed operand's rows in turn; else None.

        Unrolled as nested, a reduction over rows ``k`` around a loop over output registers
        ``j`` (a matvec's 8 rows of weights times 6 registers of outputs) reads a whole run
        of each row, then the next row. Emitted with ``j`` outside instead, each
        accumulator's sum over the rows comes in turn: the same additions in the same order
        for every output (the result is bit for bit the same), but consecutive loads visit
        the rows one vector at a time. Streaming a matvec's weights from memory, that ran
        10-13% faster on a Zen 3 EPYC, and visits of 128 bytes or less per row in
        hand-written nests as fast, 192 or more as slow (BENCHMARKS.md, "The f32 matvec's
        order of loads"). The cost model does not see the order of loads, so this is
        codegen's choice, for the one shape of nest where it is free: both loops unrolled
        and tail-free, the inner one directly the body (nothing emitted between them), and
        an operand in memory that the inner loop walks as one run per row of the outer,
        rows apart (the run's extent at most the distance between rows). Where that operand
        is read across its rows already (a column of a row-major tile), nothing changes.
        """
        op = em.ctx.ruleset.ops[impl.spec.op]  # the body's op too: a loop tiles its own Spec
        if self.tail is not None or self.var not in op.reduction_vars:
            return None
        inner = impl.children[0].action
        if type(inner) is not LoopAction or inner.tail is not None or inner.trips < 2:
            return None
        inner_uses = op.operands_using(inner.var)
        if inner.var in op.reduction_vars or not any(
            views[i].buffer.kind == "registers" for i, _ in inner_uses
        ):
            return None
        outer_dims = dict(op.operands_using(self.var))
        for i, dim in inner_uses:
            view, row_dim = views[i], outer_dims.get(i)
            if row_dim is None or row_dim == dim or view.buffer.kind == "registers":
                continue
            run, row = offset_step(view, dim, inner.step), offset_step(view, row_dim, self.step)
            if run.is_const() and row.is_const() and 0 < run.const * inner.trips <= row.const:
                return inner
        return None

    def pieces(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Emitter, Lin], None]] | None:
        """The trips of a ``for`` loop, one piece each, and the tail as the last piece."""
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        if self.trips < 2 or any(views[i].buffer.kind == "registers" for i, _ in uses):
            return None
        body = impl.children[0]
        tail = impl.children[1] if self.tail is not None else None

        def at(offset: Lin | int) -> list[View]:
            return shift_views(views, uses, offset)

        def emit_piece(em: Emitter, index: Lin) -> None:
            if tail is None:
                em.node(body, at(index.scale(self.step)))
                return
            em.emit(f"if ({index.render()} < {self.trips}) {{")
            em.depth += 1
            em.node(body, at(index.scale(self.step)))
            em.depth -= 1
            em.emit("} else {")
            em.depth += 1
            em.node(tail, at(self.trips * self.step))
            em.depth -= 1
            em.emit("}")

        return self.trips + (tail is not None), emit_piece

    def piece_reads(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Lin], list[tuple[View, TensorSpec]]]] | None:
        """The whole trips of ``pieces`` (not the tail) and the inputs in memory each reads."""
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        body = impl.children[0].spec

        def reads(index: Lin) -> list[tuple[View, TensorSpec]]:
            at = shift_views(views, uses, index.scale(self.step))
            inputs = enumerate(body.operands[:-1])
            return [(at[i], t) for i, t in inputs if at[i].buffer.kind == "memory"]

        return self.trips, reads

    def _emit_copying_ahead(
        self,
        em: Emitter,
        copy: Copy,
        at: Callable[[Lin | int], list[View]],
        step: int,
        trips: int,
    ) -> bool:
        """The loop (``trips`` of ``step``) with two buffers, each trip copying the next trip's
        tile into the other (``morello.nodes.copy_ahead``); whether the body's loop took the
        copy's pieces."""
        buffers = ahead.panels(em, copy, at(0)[copy.operand])
        return ahead.later_trips(em, copy, at, step, 0, trips, buffers)

    def _emit_nest_copying_ahead(
        self,
        em: Emitter,
        body: Impl,
        views: list[View],
        uses: Sequence[tuple[int, int]],
        at: Callable[[Lin | int], list[View]],
    ) -> bool:
        """This loop and the loop that is its whole body, when both run along the same index
        and the inner one's trips cover a step exactly (no tail), written as one loop of
        all the inner trips, copying ahead across the whole nest; whether it was written so.

        The search splits an extent into such a nest when the remainder is cheaper that way
        (512 columns as 10 x (2 x 24) + 32 rather than 21 x 24 + 8). Written as two loops,
        each outer trip's first tile would be copied in a pass of its own before the inner
        loop; as one loop, every tile but the very first is copied during the trip before.
        The trips run in the same order over the same views, so the values are the same.
        """
        inner = body.action
        if (
            type(inner) is not LoopAction
            or inner.var != self.var
            or inner.tail is not None  # (then its trips cover this loop's step)
            or inner.trips < 2
        ):
            return False
        copy = ahead.copy_ahead(em, body.children[0], views, uses)
        trips = self.trips * inner.trips
        return copy is not None and em.attempt(
            lambda: self._emit_copying_ahead(em, copy, at, inner.step, trips)
        )


def _chain_slot(ctx: SynthesisContext) -> int | None:
    """The position of the resource named "chain" in the target's resources, if any."""
    resources = ctx.coefficients.resources
    if "chain" not in resources:
        return None
    return list(resources).index("chain")
