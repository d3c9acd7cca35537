"""Compile and run synthesized bf16 x bf16 -> f32 matmuls against NumPy.

Every ``m`` in {1, 2, 5}, ``k`` in {1, 3, 16, 64}, ``n`` in {1, 8, 24, 64}, with ``a``
row-major and ``b`` row-major, column-major, or ``packed_cols(8)`` (where 8 divides ``n``);
``c`` is f32 and row-major. The inputs are exact bf16 values widened by the kernels, so the
only error left is the f32 accumulation the harness bounds. As in test_matmul_vs_numpy.py,
all syntheses share one memo dict and each layout's functions are compiled into one shared
library, built the first time one of its shapes is tested.

Besides the grid: the packed case should reach the AVX2 bf16 kernel (not only the scalar
one), the harness should hand bf16 parameters exactly representable values and lay out
``packed_cols`` the way the header documents it, and the comparison should be tight enough
to fail on a real error, e.g. inputs rounded by truncation instead of to nearest even.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from spec_library import Built, Libraries

from morello.codegen import harness
from morello.context import SynthesisContext
from morello.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from morello.impl import Impl
from morello.nodes import KernelAction

SHAPES = tuple(itertools.product((1, 2, 5), (1, 3, 16, 64), (1, 8, 24, 64)))
#: Layout of b for each case name; a and c are always row-major.
B_LAYOUTS = {"row": "row_major", "col": "col_major", "packed8": "packed_cols(8)"}
VECTOR_KERNEL = "bcast_fma_bf16_f32x8"

pytestmark = [pytest.mark.target("zen1"), pytest.mark.runs_code]


def func_name(layout: str, shape: tuple[int, int, int]) -> str:
    """A C function name unique to one test case."""
    m, k, n = shape
    return f"bf16mm_{layout}_{m}x{k}x{n}"


def shapes_for(layout: str) -> list[tuple[int, int, int]]:
    """The shapes tested with ``b`` in ``layout`` (packed_cols(8) needs 8 to divide n)."""
    return [s for s in SHAPES if layout != "packed8" or s[2] % 8 == 0]


def spec_text(layout: str, shapes: list[tuple[int, int, int]]) -> str:
    """A spec file with one bf16 matmul function per shape."""
    b_layout = B_LAYOUTS[layout]
    return "".join(
        f"func {func_name(layout, (m, k, n))}"
        f"(a: bf16[{m}, {k}] row_major, b: bf16[{k}, {n}] {b_layout}) -> c: f32[{m}, {n}] {{\n"
        "    c = matmul(a, b)\n"
        "}\n"
        for m, k, n in shapes
    )


class _Libraries(Libraries):
    """One library per layout of b, with all its shapes, built the first time one is tested."""

    def get(self, layout: str, shape: tuple[int, int, int]) -> Built:
        text = functools.partial(spec_text, layout, shapes_for(layout))
        return self.function(func_name(layout, shape), f"bf16mm_{layout}", text)


@pytest.fixture(scope="module")
def libraries(ctx: SynthesisContext, tmp_path_factory: pytest.TempPathFactory) -> _Libraries:
    return _Libraries(ctx, tmp_path_factory.mktemp("bf16_matmul"))


CASES = [
    pytest.param(layout, shape, id=f"{layout}-{'x'.join(map(str, shape))}")
    for layout in B_LAYOUTS
    for shape in shapes_for(layout)
]


@pytest.mark.parametrize(("layout", "shape"), CASES)
def test_bf16_matmul_matches_numpy(
    libraries: _Libraries, layout: str, shape: tuple[int, int, int]
) -> None:
    lib, program, _ = libraries.get(layout, shape)
    assert [ts.dtype.name for _, ts in program.params] == ["bf16", "bf16"]
    assert program.result[1].dtype.name == "f32"
    harness.check(lib, program, libraries.ctx, seed=sum(shape))  # raises on a mismatch


def _kernels(impl: Impl) -> set[str]:
    return {n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)}


def test_bf16_matmul_packed_uses_vector_kernel(libraries: _Libraries) -> None:
    # Guards against the grid silently testing the scalar bf16 kernel only.
    _, _, impl = libraries.get("packed8", (1, 64, 64))
    kernels = _kernels(impl)
    assert VECTOR_KERNEL in kernels, f"1x64x64 bf16 with b packed_cols(8) uses only {kernels}"
    assert "mac_bf16_f32" not in kernels, f"scalar bf16 kernel left in: {sorted(kernels)}"


def test_bf16_matmul_random_inputs_are_bf16_values(libraries: _Libraries) -> None:
    _, program, _ = libraries.get("packed8", (5, 64, 64))
    bf16 = libraries.ctx.dtype("bf16")
    inputs = harness.random_inputs(program, libraries.ctx, seed=11)
    assert set(inputs) == {"a", "b"}
    for name, values in inputs.items():
        assert values.dtype == np.float32, name
        assert values.shape == dict(program.params)[name].shape
        np.testing.assert_array_equal(bf16.quantize(values), values, err_msg=name)
        assert not (values.view(np.uint32) & 0xFFFF).any(), f"{name} has bits below bf16"
        # Spread over [-1, 1), not collapsed onto a few values.
        assert np.all(np.abs(values) <= 1.0)
        assert len(np.unique(values)) > values.size // 4, name


def test_bf16_matmul_packed_buffer_layout(libraries: _Libraries) -> None:
    # The matmul checks go through harness.to_buffer, so a layout misread the same way by
    # the harness and the generated C would pass them; pin packed_cols(8) independently:
    # b[k, n] lives at (n // 8) * (K * 8) + k * 8 + n % 8, as a uint16 bf16 pattern.
    _, program, _ = libraries.get("packed8", (2, 3, 24))
    ts = dict(program.params)["b"]
    k_dim, n_dim = ts.shape
    values = libraries.ctx.dtype("bf16").quantize(
        np.arange(k_dim * n_dim, dtype=np.float32).reshape(k_dim, n_dim) + 0.5
    )
    buf = harness.to_buffer(values, ts)
    assert buf.dtype == np.uint16
    assert buf.size == k_dim * n_dim
    for k in range(k_dim):
        for n in range(n_dim):
            offset = (n // 8) * (k_dim * 8) + k * 8 + n % 8
            assert buf[offset] == f32_to_bf16_bits(values[k, n]), (k, n)
    np.testing.assert_array_equal(harness.from_buffer(buf, ts), values)


def test_bf16_matmul_compare_catches_wrong_answers(libraries: _Libraries) -> None:
    lib, program, _ = libraries.get("packed8", (2, 64, 24))
    ctx = libraries.ctx
    inputs = harness.random_inputs(program, ctx, seed=5)
    got = harness.run(lib, program, inputs, ctx)
    want = harness.reference(program, inputs, ctx)
    allowed = harness.tolerance(program, inputs, ctx)
    assert harness.compare(got, want, allowed).ok

    # One element off by 4x its bound fails, and is the one reported.
    for index in [(0, 0), (1, 17)]:
        wrong = got.copy()
        wrong[index] += np.float32(4 * allowed[index])
        assert wrong[index] != got[index]
        result = harness.compare(wrong, want, allowed)
        assert not result.ok
        assert result.first_bad == index
    nan = got.copy()
    nan[1, 3] = np.nan
    assert harness.compare(nan, want, allowed).first_bad == (1, 3)


def test_bf16_matmul_compare_catches_truncated_inputs(libraries: _Libraries) -> None:
    # Feed the kernel inputs rounded to nearest even, but compute the reference (and its
    # bound) from the same f32 values truncated to bf16: the check must see the difference.
    lib, program, _ = libraries.get("packed8", (2, 64, 24))
    ctx = libraries.ctx
    rng = np.random.default_rng(9)
    raw = {
        name: rng.uniform(-1.0, 1.0, size=ts.shape).astype(np.float32)
        for name, ts in program.params
    }
    nearest = {name: ctx.dtype("bf16").quantize(v) for name, v in raw.items()}
    truncated = {name: bf16_bits_to_f32(v.view(np.uint32) >> 16) for name, v in raw.items()}
    assert any(not np.array_equal(nearest[n], truncated[n]) for n in raw)

    got = harness.run(lib, program, nearest, ctx)
    right = harness.compare(
        got, harness.reference(program, nearest, ctx), harness.tolerance(program, nearest, ctx)
    )
    assert right.ok
    wrong = harness.compare(
        got, harness.reference(program, truncated, ctx), harness.tolerance(program, truncated, ctx)
    )
    assert not wrong.ok
    assert wrong.max_abs_error > 4 * wrong.max_allowed
