"""Boxes of equal solutions: insert, merge, look up.

A box is an inclusive range ``[lo, hi]`` of points of one table, with one value: a decision
that means the same at every point ("loop over n in steps of 8", "kernel k"), or "no
implementation" (None). Costs and memory peaks are not stored: they follow from the decision
and the children's answers, and leaving them out lets boxes of one decision merge across
sizes, not only across memory limits. Inserting a box next to one with an identical value,
with equal extents on every other axis, merges the two.

Lookups go through an index from the *size part* of a point (the coordinates that are not
memory limits) to the boxes covering it; the few boxes at one size part are scanned over the
limit coordinates. Size parts are small (log2 of tile sizes), so a box is indexed under a
handful of entries while lookups stay O(boxes at one size part), however many boxes there are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import attrs

Point = tuple[int, ...]
Value = tuple[Any, ...] | None  # a decision, or None: no implementation


@attrs.define(eq=False)
class Box:
    """One box: every point from ``lo`` to ``hi`` (inclusive) has ``value``."""

    lo: Point
    hi: Point
    value: Value

    def contains(self, p: Point) -> bool:
        """Whether ``p`` lies in the box."""
        # A plain loop: twice as fast as all() over a generator, and it stops at the first
        # coordinate outside (lookups and merges test many boxes that miss).
        for a, x, b in zip(self.lo, p, self.hi, strict=True):  # noqa: SIM110
            if not a <= x <= b:
                return False
        return True

    def volume(self) -> int:
        """Number of points covered."""
        v = 1
        for a, b in zip(self.lo, self.hi, strict=True):
            v *= b - a + 1
        return v


def by_corners(box: Box) -> tuple[Point, Point]:
    """Sort key: the box's corners (a fixed order for storage and batches)."""
    return box.lo, box.hi


class BoxTable:
    """The boxes of one table key. ``nsize`` leading coordinates are the size part."""

    def __init__(self, nsize: int) -> None:
        self.nsize = nsize
        self.boxes: set[Box] = set()
        self._index: dict[Point, list[Box]] = {}
        self.rev = 0  # the stored revision these boxes include (see sqlite.py)
        # Boxes made by ``insert`` and not handed on yet: a read-only table's ``collect``
        # sends them to the writer, a writable table's save appends them to the stored row.
        self.fresh: set[Box] = set()
        self.chunks = 0  # the chunks of the stored row (see sqlite.py)

    def __len__(self) -> int:
        return len(self.boxes)

    def _size_points(self, box: Box) -> Iterator[Point]:
        ranges = [range(box.lo[i], box.hi[i] + 1) for i in range(self.nsize)]
        return itertools.product(*ranges)

    def _add(self, box: Box) -> None:
        self.boxes.add(box)
        for sp in self._size_points(box):
            self._index.setdefault(sp, []).append(box)

    def _remove(self, box: Box) -> None:
        self.boxes.discard(box)
        for sp in self._size_points(box):
            self._index[sp].remove(box)
        self.fresh.discard(box)

    def lookup(self, p: Point) -> Box | None:
        """A box containing ``p``, or None."""
        for box in self._index.get(p[: self.nsize], ()):
            if box.contains(p):
                return box
        return None

    def load(self, box: Box) -> None:
        """Add a box read from storage, without merging."""
        self._add(box)

    def sorted_boxes(self) -> list[Box]:
        """The boxes in a fixed order (by corners), for storage."""
        return sorted(self.boxes, key=by_corners)

    def holding(self, lo: Point, hi: Point, value: Value) -> Box | None:
        """A box that covers all of ``[lo, hi]`` with ``value``, or None."""
        for box in self._index.get(lo[: self.nsize], ()):
            if box.value == value and box.contains(lo) and box.contains(hi):
                return box
        return None

    def insert(self, lo: Point, hi: Point, value: Value) -> Box:
        """Insert ``[lo, hi]`` with ``value``, merging with identical neighbours.

        A box already covering the whole range with the same value absorbs the insert.
        """
        held = self.holding(lo, hi, value)
        if held is not None:
            return held
        box = Box(lo, hi, value)
        while True:
            other = self._mergeable(box)
            if other is None:
                break
            self._remove(other)
            box = Box(tuple(map(min, box.lo, other.lo)), tuple(map(max, box.hi, other.hi)), value)
        self._add(box)
        self.fresh.add(box)
        return box

    def _mergeable(self, box: Box) -> Box | None:
        """An existing box with the same value whose union with ``box`` is a box."""
        seen: set[int] = set()
        for sp in self._neighbour_size_points(box):
            for other in self._index.get(sp, ()):
                if id(other) in seen or other.value != box.value:
                    continue
                seen.add(id(other))
                if _union_is_box(box, other):
                    return other
        return None

    def _neighbour_size_points(self, box: Box) -> Iterator[Point]:
        yield box.lo[: self.nsize]
        for i in range(self.nsize):
            below = list(box.lo[: self.nsize])
            below[i] -= 1
            yield tuple(below)
            above = list(box.lo[: self.nsize])
            above[i] = box.hi[i] + 1
            yield tuple(above)


def _union_is_box(a: Box, b: Box) -> bool:
    """Whether two boxes touch or overlap along one axis and agree on every other."""
    alo, ahi, blo, bhi = a.lo, a.hi, b.lo, b.hi
    axis = -1
    for i in range(len(alo)):
        if alo[i] != blo[i] or ahi[i] != bhi[i]:
            if axis >= 0:
                return False  # a second axis differs (most candidates stop here)
            axis = i
    if axis < 0:
        return True
    return alo[axis] <= bhi[axis] + 1 and blo[axis] <= ahi[axis] + 1
