"""Equal operands are one object: the search's dictionaries then compare keys by identity.

``spec.interned`` keeps one TensorSpec per value, the tiles and moved operands of the
rewrites go through it, and ``spec.lines_and_runs`` memoizes a tile's geometry. None of
this may change what a Spec is equal to or what the search answers.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

import attrs
import pytest

from morello import spec as spec_module
from morello.context import SynthesisContext
from morello.dtypes import dtype
from morello.layout import layout_by_name
from morello.rules.schemas import tile_tensor
from morello.search.solve import synthesize
from morello.spec import Spec, TensorSpec, interned, lines_and_runs
from morello.target import MemoryLevel

GL = MemoryLevel(name="GL", capacity=1 << 31)


def _tensor(rows: int, cols: int) -> TensorSpec:
    layout = layout_by_name("row_major", 2)
    assert layout is not None
    return TensorSpec((rows, cols), dtype("f32"), GL, layout.canonical((rows, cols)))


def test_interned_returns_one_object_per_value() -> None:
    a, b = _tensor(8, 16), _tensor(8, 16)
    assert a == b and a is not b
    assert interned(a) is interned(b)
    assert interned(_tensor(8, 32)) is not interned(a)


def test_tiles_of_equal_tensors_are_the_same_object() -> None:
    # Two equal parents that are different objects (as a Spec read back from the memo
    # table has): their tiles are one object, even past the function's own cache.
    first = tile_tensor.__wrapped__(_tensor(64, 64), 1, 8)
    second = tile_tensor.__wrapped__(attrs.evolve(_tensor(64, 64)), 1, 8)
    assert first is not None and first is second
    assert first.shape == (64, 8)


def test_the_table_is_bounded_and_keeps_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spec_module, "_INTERNED", {})
    monkeypatch.setattr(spec_module, "_INTERN_LIMIT", 2)
    kept = [interned(_tensor(4, n)) for n in (8, 16, 24, 32)]
    assert len(spec_module._INTERNED) <= 2
    assert [t.shape for t in kept] == [(4, 8), (4, 16), (4, 24), (4, 32)]
    assert interned(_tensor(4, 32)) is kept[-1]


def test_geometry_matches_the_layout() -> None:
    whole = _tensor(64, 64)
    tile = tile_tensor(whole, 1, 8)
    assert tile is not None
    for ts in (whole, tile):
        expect = (ts.layout.cache_lines(ts.shape, 4, 64), ts.layout.runs(ts.shape))
        assert lines_and_runs(ts, 4, 64) == expect
    assert lines_and_runs(tile, 4, 64) == (64, 64)  # 64 rows of 32 bytes, one line each


def test_an_answer_survives_pickling_and_fresh_objects(
    ctx: SynthesisContext, matmul_spec: Callable[..., Spec]
) -> None:
    # A root made of fresh objects (unpickled: none of them interned) gets the same answer.
    root = matmul_spec(8, 8, 8)
    again = pickle.loads(pickle.dumps(root))
    assert again == root and again.operands[0] is not root.operands[0]
    assert synthesize(again, ctx)[0].cost == synthesize(root, ctx)[0].cost
