"""The box table answers exactly like the dict of point solutions it was filled from."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from morello.db.boxes import Box, BoxTable, _union_is_box

POINTS = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 3))
VALUES = st.sampled_from(["a", "b", "c"])


@given(st.dictionaries(POINTS, VALUES, max_size=80))
def test_boxes_answer_like_a_dict(points: dict[tuple[int, int, int], str]) -> None:
    table = BoxTable(nsize=2)
    for p, v in points.items():
        table.insert(p, p, (v,))
    for p in itertools.product(range(7), range(7), range(5)):
        box = table.lookup(p)
        if p in points:
            assert box is not None and box.value == (points[p],)
        else:
            assert box is None
    assert sum(b.volume() for b in table.boxes) == len(points)


def test_boxes_merge_adjacent_equal_values() -> None:
    table = BoxTable(nsize=1)
    for i in range(8):
        table.insert((i, 2), (i, 5), ("same",))
    assert len(table) == 1
    (box,) = table.boxes
    assert (box.lo, box.hi) == ((0, 2), (7, 5))
    table.insert((8, 2), (8, 4), ("same",))  # different extent on axis 1: no merge
    assert len(table) == 2


def test_boxes_range_inserts_cover_their_range() -> None:
    table = BoxTable(nsize=1)
    table.insert((3, 0, 1), (3, 4, 6), ("v",))
    assert table.lookup((3, 2, 5)) is not None
    assert table.lookup((3, 5, 5)) is None
    assert table.lookup((2, 2, 5)) is None


def _points(lo: tuple[int, ...], hi: tuple[int, ...]) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi, strict=True))))


CORNERS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=3, max_size=3)


@given(CORNERS, CORNERS)
def test_two_boxes_merge_exactly_when_their_union_is_a_box(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    # Against the definition, points: two boxes merge when the points of both are the points
    # of their bounding box. (One inside the other is absorbed by ``insert`` before any
    # merge is tried, so the test need not say yes to it.)
    a_lo, a_hi = tuple(x for x, _ in a), tuple(x + d for x, d in a)
    b_lo, b_hi = tuple(x for x, _ in b), tuple(x + d for x, d in b)
    pa, pb = _points(a_lo, a_hi), _points(b_lo, b_hi)
    bound = _points(tuple(map(min, a_lo, b_lo)), tuple(map(max, a_hi, b_hi)))
    box_a, box_b = Box(a_lo, a_hi, None), Box(b_lo, b_hi, None)
    for said in (_union_is_box(box_a, box_b), _union_is_box(box_b, box_a)):
        if said:
            assert pa | pb == bound
        elif not (pa <= pb or pb <= pa):
            assert pa | pb != bound
