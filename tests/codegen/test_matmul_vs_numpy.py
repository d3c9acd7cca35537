"""Compile and run synthesized matmuls against NumPy, over the shape list and both layouts.

Every ``m, k, n`` in {1, 2, 3, 4, 5, 8, 16, 32} plus a few larger shapes, once with every
operand row-major and once with ``a`` and ``b`` column-major (``c`` row-major). To stay fast,
all syntheses share one memo dict (sub-problems recur across shapes) and the functions of a
batch of shapes are compiled into one shared library; a batch is built the first time one
of its shapes is tested. Each shape remains its own test, so ``-k 'row and 8x8x8'`` works.
"""

from __future__ import annotations

import functools
import itertools

import pytest
from spec_library import Built, Libraries

from morello.codegen import harness
from morello.context import SynthesisContext
from morello.nodes import KernelAction

DIMS = (1, 2, 3, 4, 5, 8, 16, 32)
SHAPES = (*itertools.product(DIMS, repeat=3), (64, 64, 64), (1, 256, 256), (128, 64, 32))
#: Layouts of (a, b); c is always row-major.
LAYOUTS = {"row": ("row_major", "row_major"), "col": ("col_major", "col_major")}
BATCH_SIZE = 64

pytestmark = pytest.mark.runs_code


def func_name(layout: str, shape: tuple[int, int, int]) -> str:
    """A C function name unique to one test case."""
    m, k, n = shape
    return f"mm_{layout}_{m}x{k}x{n}"


def spec_text(layout: str, shapes: list[tuple[int, int, int]]) -> str:
    """A spec file with one matmul function per shape."""
    a_layout, b_layout = LAYOUTS[layout]
    funcs = []
    for m, k, n in shapes:
        funcs.append(
            f"func {func_name(layout, (m, k, n))}"
            f"(a: f32[{m}, {k}] {a_layout}, b: f32[{k}, {n}] {b_layout}) -> c: f32[{m}, {n}] {{\n"
            "    c = matmul(a, b)\n"
            "}\n"
        )
    return "".join(funcs)


class _Batches(Libraries):
    """Batches of BATCH_SIZE shapes per library, built the first time one of them is tested."""

    def get(self, layout: str, shape: tuple[int, int, int]) -> Built:
        start = SHAPES.index(shape) // BATCH_SIZE * BATCH_SIZE
        text = functools.partial(spec_text, layout, list(SHAPES[start : start + BATCH_SIZE]))
        return self.function(func_name(layout, shape), f"mm_{layout}_{start}", text)


@pytest.fixture(scope="module")
def batches(ctx: SynthesisContext, tmp_path_factory: pytest.TempPathFactory) -> _Batches:
    return _Batches(ctx, tmp_path_factory.mktemp("matmul_vs_numpy"))


CASES = [
    pytest.param(layout, shape, id=f"{layout}-{'x'.join(map(str, shape))}")
    for layout in LAYOUTS
    for shape in SHAPES
]


@pytest.mark.parametrize(("layout", "shape"), CASES)
def test_matmul_matches_numpy(batches: _Batches, layout: str, shape: tuple[int, int, int]) -> None:
    lib, program, _ = batches.get(layout, shape)
    harness.check(lib, program, batches.ctx, seed=sum(shape))  # raises on a mismatch


def test_matmul_row_major_large_shape_uses_vector_fma(batches: _Batches) -> None:
    # Guards against the cases above silently testing scalar code only: a row-major
    # 64x64x64 matmul should use a vector FMA kernel. (With b column-major, rows of b reach
    # vectors only through a packed copy, see tests/search/test_packing.py; see
    # tests/rules/test_every_kernel.py for each vector kernel on its own.)
    _, _, impl = batches.get("row", (64, 64, 64))
    ruleset = batches.ctx.ruleset
    kernels = sorted({n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)})
    vector_fma = [
        k
        for k in kernels
        if ruleset.kernel(k).op == "matmul"
        and any(p.vector_size for p in ruleset.kernel(k).operands)
    ]
    assert vector_fma, f"64x64x64 row-major uses only {kernels}"
