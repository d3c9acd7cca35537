"""Spec <-> (table key, point) round trips, on canonical Specs drawn by hypothesis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from morello.context import SynthesisContext
from morello.db.coords import coords_to_spec, size_coord, size_from_coord, spec_to_coords
from morello.dtypes import dtype
from morello.layout import layout_by_name
from morello.spec import Spec, TensorSpec

SIZES = st.one_of(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 1024]), st.integers(1, 100))


@st.composite
def tensor_specs(draw: st.DrawFn, shape: tuple[int, ...], ctx: SynthesisContext) -> TensorSpec:
    level = draw(st.sampled_from([lv.name for lv in ctx.target.levels]))
    name = draw(st.sampled_from(ctx.target.layouts))
    layout = layout_by_name(name, len(shape))
    assert layout is not None
    canon = layout.canonical(shape)
    assert canon is not None
    canon = type(canon)(canon.dims, draw(st.integers(0, len(canon.dims))))
    vs = None
    lv = ctx.target.level(level)
    if lv.vector_bytes:
        lanes = [vb // 4 for vb in lv.vector_bytes if (vb // 4) and len(shape)]
        vs = draw(st.sampled_from(lanes))
    return TensorSpec(shape, dtype("f32"), lv, canon, vs)


@st.composite
def matmul_specs(draw: st.DrawFn, ctx: SynthesisContext) -> Spec:
    m, k, n = draw(SIZES), draw(SIZES), draw(SIZES)
    shapes = [(m, k), (k, n), (m, n)]
    operands = [draw(tensor_specs(s, ctx)) for s in shapes]
    limits = tuple(
        draw(st.sampled_from([0] + [1 << i for i in range(lv.limit_units.bit_length())]))
        for lv in ctx.target.levels
    )
    return Spec("matmul", tuple(operands), draw(st.booleans()), limits, draw(st.booleans()))


@given(data=st.data())
def test_coords_spec_point_spec_round_trips(ctx: SynthesisContext, data: st.DataObject) -> None:
    spec = data.draw(matmul_specs(ctx))
    key, point = spec_to_coords(spec, ctx)
    assert all(isinstance(c, int) and c >= 0 for c in point)
    assert coords_to_spec(key, point, ctx) == spec


def test_coords_tile_sizes_are_positions_and_others_families_in_the_key(
    ctx: SynthesisContext,
) -> None:
    row = layout_by_name("row_major", 2)
    assert row is not None
    ts = [
        TensorSpec(s, dtype("f32"), ctx.target.levels[0], row.canonical(s))  # type: ignore[arg-type]
        for s in [(8, 5), (5, 12), (8, 12)]
    ]
    spec = Spec("matmul", ts, False, ctx.target.max_limits())
    key, point = spec_to_coords(spec, ctx)
    assert point[:3] == (5, 6, 0)  # m = 8, n = 12 = 3 * 4, k = 5 = 5 * 2^0 is neither
    assert key[3] == (0, 0, 5)


def test_size_coordinates_number_the_tile_sizes_in_order() -> None:
    sizes = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
    assert [size_coord(n) for n in sizes] == [(0, c) for c in range(len(sizes))]
    assert [size_from_coord(0, c) for c in range(len(sizes))] == sizes


def test_other_sizes_are_families_of_their_odd_part_on_the_doubling_scale() -> None:
    # 7, 14, 28, 56: the 7 x 2^k tiles are neighbouring points of family 7.
    assert [size_coord(n) for n in (7, 14, 28, 56)] == [(7, 0), (7, 1), (7, 2), (7, 3)]
    assert [size_coord(n) for n in (5, 9, 10, 18, 36, 100)] == [
        (5, 0),
        (9, 0),
        (5, 1),
        (9, 1),
        (9, 2),
        (25, 2),
    ]


@given(st.integers(1, 1 << 40))
def test_every_positive_size_has_coordinates_and_back(n: int) -> None:
    family, c = size_coord(n)
    assert family == 0 or (family % 2 == 1 and family >= 5)
    assert size_from_coord(family, c) == n
