"""Set-associative caches and packing into them.

* ``spec.cache_ways``: the ways a tile needs in a set-associative cache, assuming its runs
  alias (a power-of-two stride, the worst case a TensorSpec cannot rule out).
* A move into a cache keeps a strided tile there only if its ways fit; a level that
  ``packs`` also offers a contiguous copy of an operand the Spec reads, never of its output.
* Target validation of ``ways`` and ``packs``.
* The generated code of a packed program: tests/codegen/test_packed_buffers.py.
"""

from __future__ import annotations

import attrs
import pytest

from morello.context import SynthesisContext
from morello.dtypes import dtype
from morello.layout import row_major
from morello.nodes import MoveAction
from morello.rules.schemas import tile_tensor
from morello.search.expand import spec_actions
from morello.spec import Spec, TensorSpec, cache_ways
from morello.target import MemoryLevel, Target

GL = MemoryLevel(name="GL", capacity=1 << 31)
L1 = MemoryLevel(name="L1", capacity=32 * 1024, addressed=False, ways=8, packs=("row_major",))


def _gl(shape: tuple[int, ...], level: MemoryLevel = GL) -> TensorSpec:
    return TensorSpec(shape, dtype("f32"), level, row_major(len(shape)))


def _tile(parent: tuple[int, int], shape: tuple[int, int], level: MemoryLevel = GL) -> TensorSpec:
    ts: TensorSpec | None = _gl(parent, level)
    for dim, size in enumerate(shape):
        assert ts is not None
        ts = tile_tensor(ts, dim, size)
    assert ts is not None
    return ts


def test_cache_ways_of_contiguous_and_strided_tiles() -> None:
    assert L1.sets == 64
    assert cache_ways(_gl((1, 256)), L1) == 1  # 16 lines in 16 sets
    assert cache_ways(_gl((64, 128)), L1) == 8  # 512 lines: the whole cache
    assert cache_ways(_tile((512, 512), (16, 16)), L1) == 16  # 16 rows, 1 line each
    assert cache_ways(_tile((512, 512), (8, 16)), L1) == 8
    assert cache_ways(_tile((4, 4096), (4, 1024)), L1) == 4  # 4 rows of 64 lines
    assert cache_ways(_tile((2, 8192), (2, 2048)), L1) == 4  # 2 rows of 128 lines
    plain = MemoryLevel(name="L1", capacity=32 * 1024, addressed=False)
    assert cache_ways(_tile((512, 512), (16, 16)), plain) == 0


def _moves_of(spec: Spec, operand: int, ctx: SynthesisContext) -> list[MoveAction]:
    return [
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, MoveAction) and a.operand == operand and a.dest.level.name == "L1"
    ]


def _matmul(ctx: SynthesisContext, a: TensorSpec, b: TensorSpec, c: TensorSpec) -> Spec:
    """A product over ``a``, ``b``, ``c`` moved into the target's main memory."""
    gl = ctx.target.levels[0]
    operands = tuple(attrs.evolve(t, level=gl) for t in (a, b, c))
    return Spec("matmul", operands, True, ctx.target.max_limits())


def test_strided_panel_is_packed_not_cached(ctx: SynthesisContext) -> None:
    if ctx.target.name != "zen1":
        pytest.skip("zen1's L1 ways and packing")
    # b: 64 rows of 16 floats, 2 KiB apart; c: 4 rows of 16 floats.
    spec = _matmul(
        ctx, _tile((512, 512), (4, 64)), _tile((512, 512), (64, 16)), _tile((512, 512), (4, 16))
    )
    b_moves = _moves_of(spec, 1, ctx)
    assert [m.new_buffer for m in b_moves] == [True], [m.describe() for m in b_moves]
    packed = b_moves[0]
    assert packed.layout == "row_major"
    assert packed.dest.layout.is_fully_contiguous()
    assert packed.prologue is not None and packed.prologue.op == "move"
    assert packed.epilogue is None
    # The output (4 runs) fits as a cached view; it is written, so it is never packed.
    c_moves = _moves_of(spec, 2, ctx)
    assert [m.new_buffer for m in c_moves] == [False]
    # A tile of 8 rows fits 8 ways: cached, and packed as an alternative.
    small = _matmul(
        ctx, _tile((512, 512), (4, 8)), _tile((512, 512), (8, 16)), _tile((512, 512), (4, 16))
    )
    assert sorted(m.new_buffer for m in _moves_of(small, 1, ctx)) == [False, True]


def test_contiguous_tile_is_not_packed_into_its_own_layout(ctx: SynthesisContext) -> None:
    if ctx.target.name != "zen1":
        pytest.skip("zen1's L1 packing")
    spec = _matmul(ctx, _gl((4, 64)), _gl((64, 16)), _gl((4, 16)))
    assert [m.new_buffer for m in _moves_of(spec, 1, ctx)] == [False]


@pytest.mark.parametrize(
    ("level", "message"),
    [
        (MemoryLevel(name="L1", capacity=1024, ways=-1), "ways must not be negative"),
        (MemoryLevel(name="L1", capacity=1024, packs=("row_major",)), "packs but is addressed"),
        (
            MemoryLevel(name="L1", capacity=1024, addressed=False, packs=("zigzag",)),
            "unknown layout 'zigzag'",
        ),
    ],
)
def test_target_rejects_bad_ways_and_packs(level: MemoryLevel, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Target(name="t", levels=(MemoryLevel(name="GL", capacity=1 << 20), level))
