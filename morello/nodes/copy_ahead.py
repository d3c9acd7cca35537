"""Copying the next trip's tile ahead: what a loop does with a body that packs an input.

A serial loop whose body copies an input the index runs along into a new buffer (a panel of
B packed into L1 for the register tiles) would copy each trip's tile in a pass of its own,
loads and stores that nothing overlaps. Instead the loop gets two buffers: the first trip's
tile is copied before the loop, and each trip copies the next trip's tile while its body
runs, one piece (a trip of the copy's own outer loop: a row of the panel) every so many
iterations of the body's innermost loop (``Emitter.for_loop``, ``Interleave``). Pieces no
loop took (there is none, or the pieces would come too far apart) are copied after the
body; when no trip's body took them, the loop is written plainly instead. A loop whose whole
body is a tail-free loop over the same index copies ahead across both, as one loop. A piece also
prefetches what a later piece will copy (``Interleave.reads``, the copy's ``piece_reads``):
spread thinly, the pieces' loads are lone misses that stall the loop. The Impl, its cost
and the values computed are those of the plain loop; only the order of the copies (and
the prefetches) change. ``LoopAction`` and ``InitLoopAction`` use it; they find the copy
through ``copy_in`` and its pieces through ``pieces`` and ``piece_reads``, which every
node kind has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from morello.codegen.c import Buffer, Interleave, Lin, View
from morello.spec import memory_units

if TYPE_CHECKING:
    from morello.codegen.c import Emitter
    from morello.impl import Impl
    from morello.nodes.base import Copy


def copy_ahead(
    em: Emitter, body: Impl, views: list[View], uses: Sequence[tuple[int, int]]
) -> Copy | None:
    """The copy ``body`` starts with, if the loop can copy it ahead: an input the index runs
    along, a serial body, two buffers that fit the level beside what the body keeps there,
    and a copy that splits into pieces."""
    copy = body.action.copy_in(body)
    if copy is None or copy.operand not in {i for i, _ in uses} or body.threads() > 1:
        return None
    level = copy.dest.level
    held = copy.body.peaks[em.ctx.target.level_index(level)]  # what the body keeps there
    if held + 2 * memory_units(copy.dest, level) > level.limit_units:
        return None  # the next tile would evict what the body reads again and again
    if (
        copy.prologue.action.pieces(em, copy.prologue, [views[copy.operand], whole(copy, "probe")])
        is None
    ):
        return None
    return copy


def panels(em: Emitter, copy: Copy, source: View) -> tuple[str, str]:
    """Declare the two buffers and copy the first trip's tile from ``source`` into the first."""
    first, second = em.declare(copy.dest), em.declare(copy.dest)
    em.node(copy.prologue, [source, whole(copy, first.name)])
    return first.name, second.name


def select(em: Emitter, copy: Copy, var: str, buffers: tuple[str, str]) -> tuple[str, str]:
    """Pointers to this trip's buffer and the next one's, alternating with ``var``."""
    c_type = copy.dest.dtype.c_type
    now, ahead = em.names.fresh("panel"), em.names.fresh("ahead")
    first, second = buffers
    em.emit(f"{c_type} *restrict {now} = {var} & 1 ? {second} : {first};")
    em.emit(f"{c_type} *restrict {ahead} = {var} & 1 ? {first} : {second};")
    return now, ahead


def trip(
    em: Emitter,
    copy: Copy,
    views: list[View],
    now: str,
    ahead: tuple[str, View, Impl, Callable[[int], str]] | None,
) -> bool:
    """One trip: ``copy.body`` over ``views`` with the copied operand read from buffer ``now``.

    ``ahead`` is what to copy meanwhile: the next trip's buffer, the view it is copied from,
    the copy (whose pieces are used), and the first piece to copy as a C expression of the
    number of pieces (that number: nothing to copy, as on the last trip); or None. Returns
    whether a loop of the body took the pieces.
    """
    body_views = list(views)
    body_views[copy.operand] = whole(copy, now)
    if ahead is None:
        em.node(copy.body, body_views)
        return False
    target, source, prologue, start = ahead
    split = prologue.action.pieces(em, prologue, [source, whole(copy, target)])
    assert split is not None  # checked by copy_ahead
    rows, emit_piece = split
    count, gap = em.names.fresh("next"), em.names.fresh("gap")
    em.emit(f"int {count} = {start(rows)};")
    em.emit(f"int {gap} = 1;")
    gap_line = len(em.lines) - 1
    outer = em.interleave
    reads = prologue.action.piece_reads(em, prologue, [source, whole(copy, target)])
    work = em.interleave = Interleave(rows, emit_piece, count, gap, len(em.loop_trips), reads=reads)
    em.node(copy.body, body_views)
    em.interleave = None
    if not work.placed:  # no loop took the pieces: the copy follows the body
        del em.lines[gap_line]
    em.emit(f"for (; {count} < {rows}; {count}++) {{")
    em.depth += 1
    emit_piece(em, Lin.var(count))
    em.depth -= 1
    em.emit("}")
    em.interleave = outer
    return work.placed


def later_trips(
    em: Emitter,
    copy: Copy,
    at: Callable[[Lin | int], list[View]],
    step: int,
    start: int,
    trips: int,
    buffers: tuple[str, str],
) -> bool:
    """Trips ``start`` to ``trips - 1`` as a ``for`` loop, each over its buffer and copying
    the next trip's tile into the other (the last copies nothing); ``at(offset)`` gives the
    views of the trip at ``offset``. Whether a trip's body took the pieces."""
    var = em.names.fresh("i")
    placed = []

    def one_trip() -> None:
        now, next_buffer = select(em, copy, var, buffers)
        offset = Lin.var(var).scale(step)
        last = f"{var} + 1 < {trips} ? 0 : "
        todo = (next_buffer, at(offset + step)[copy.operand], copy.prologue, lambda r: f"{last}{r}")
        placed.append(trip(em, copy, at(offset), now, todo))

    em.for_loop(var, start, trips, one_trip)
    return any(placed)


def whole(copy: Copy, name: str) -> View:
    """A view of all of a buffer named ``name`` holding ``copy``'s tile."""
    dest = copy.dest
    buffer = Buffer(name, dest.dtype, dest.shape, dest.layout, "memory")
    return View(buffer, tuple(Lin() for _ in dest.shape))
