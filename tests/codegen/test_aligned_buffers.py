"""Buffers handed to generated code start on a cache line, whatever NumPy would have chosen."""

from __future__ import annotations

import numpy as np
import pytest

from morello.codegen.harness import BUFFER_ALIGN, aligned_empty, from_buffer, to_buffer
from morello.context import SynthesisContext
from morello.layout import packed_cols
from morello.spec import TensorSpec


@pytest.mark.parametrize("count", [0, 1, 3, 17, 4096])
@pytest.mark.parametrize("dtype", ["float32", "uint16", "float64"])
def test_aligned_empty(count: int, dtype: str) -> None:
    for _ in range(8):  # NumPy's own placement varies between allocations
        a = aligned_empty(count, np.dtype(dtype))
        assert a.ctypes.data % BUFFER_ALIGN == 0
        assert a.shape == (count,) and a.dtype == np.dtype(dtype)
        a[:] = 1  # writable over its whole length


def test_to_buffer_is_aligned_and_round_trips(ctx: SynthesisContext) -> None:
    layout = packed_cols(2, 4).canonical((3, 8))
    assert layout is not None
    ts = TensorSpec((3, 8), ctx.dtype("bf16"), ctx.target.levels[0], layout)
    values = ctx.dtype("bf16").quantize(np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8))
    buf = to_buffer(values, ts)
    assert buf.ctypes.data % BUFFER_ALIGN == 0
    assert np.array_equal(from_buffer(buf, ts), values)
