"""Every op of the core rule set, alone and in graphs, synthesized, compiled and compared with
NumPy: elementwise ops (with a broadcast row), reductions along a row, softmax through its
decomposition, scalars (rank 0: a vector's sum, maximum or dot product, elementwise ops of
scalars, a scalar broadcast over a vector or a matrix), and the graphs of the examples at
small shapes (a dense layer with bias and ReLU, two layers of an MLP, an attention head).

Shapes are small so the search stays quick, with extents that are not multiples of the
vector width (tails) as well as ones that are. ``check`` raises on a mismatch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize


def _unary(op: str, m: int, n: int) -> str:
    return f"func f(x: f32[{m}, {n}]) -> y: f32[{m}, {n}] {{\n    y = {op}(x)\n}}\n"


def _binary(op: str, m: int, n: int, row: bool) -> str:
    b = f"[{n}]" if row else f"[{m}, {n}]"
    return f"func f(x: f32[{m}, {n}], b: f32{b}) -> y: f32[{m}, {n}] {{\n    y = {op}(x, b)\n}}\n"


def _reduce(op: str, m: int, n: int) -> str:
    return f"func f(x: f32[{m}, {n}]) -> y: f32[{m}] {{\n    y = {op}(x)\n}}\n"


def _vector(op: str, n: int) -> str:
    args = "x" if op in ("relu", "exp") else "x, b"
    return f"func f(x: f32[{n}], b: f32[{n}]) -> y: f32[{n}] {{\n    y = {op}({args})\n}}\n"


def _matvec(k: int, n: int, vector_first: bool, dt: str = "f32") -> str:
    if vector_first:
        params, out = f"x: {dt}[{k}], w: {dt}[{k}, {n}]", n
    else:
        params, out = f"w: {dt}[{n}, {k}], x: {dt}[{k}]", n
    args = "x, w" if vector_first else "w, x"
    return f"func f({params}) -> y: f32[{out}] {{\n    y = matmul({args})\n}}\n"


def _scalar(op: str, n: int, dt: str = "f32") -> str:
    """``op`` of whole vectors into a scalar (rank 0): a sum, a maximum, a dot product."""
    params, args = (
        (f"x: {dt}[{n}], b: {dt}[{n}]", "x, b") if op == "matmul" else (f"x: {dt}[{n}]", "x")
    )
    return f"func f({params}) -> y: f32[] {{\n    y = {op}({args})\n}}\n"


def _with_scalar(op: str, n: int) -> str:
    """``op`` of a vector and a scalar broadcast along it."""
    return f"func f(x: f32[{n}], s: f32[]) -> y: f32[{n}] {{\n    y = {op}(x, s)\n}}\n"


def _matrix_with_scalar(op: str, m: int, n: int) -> str:
    """``op`` of a matrix and a scalar broadcast over it."""
    params = f"x: f32[{m}, {n}], s: f32[]"
    return f"func f({params}) -> y: f32[{m}, {n}] {{\n    y = {op}(x, s)\n}}\n"


def _of_scalars(op: str) -> str:
    args = "a" if op in ("relu", "exp") else "a, b"
    return f"func f(a: f32[], b: f32[]) -> y: f32[] {{\n    y = {op}({args})\n}}\n"


SINGLE_OPS = {
    **{f"{op}-{shape}": _binary(op, 2, n, False) for op in ("add", "sub", "mul", "div", "max")
       for shape, n in (("16", 16), ("tail", 11))},
    **{f"{op}-row": _binary(op, 3, 16, True) for op in ("add", "sub", "mul", "div", "max")},
    "relu": _unary("relu", 2, 24),
    "exp": _unary("exp", 2, 16),
    "exp-tail": _unary("exp", 1, 13),
    **{f"{op}-vector-{n}": _vector(op, n) for n in (16, 13)
       for op in ("add", "sub", "mul", "div", "max", "relu", "exp")},
    **{f"{name}-{dt}-{k}x{n}": _matvec(k, n, first, dt)
       for name, first in (("vecmat", True), ("matvec", False)) for dt in ("f32", "bf16")
       for k, n in ((16, 24), (37, 13))},
    # A kernel reading rows {stride(a)} apart, over strided tiles of packed buffers too.
    **{f"matvec-{layout}": (
        f"func f(w: f32[24, 40] {layout}, x: f32[40]) -> y: f32[24] {{\n"
        "    y = matmul(w, x)\n}\n"
    ) for layout in ("col_major", "packed_cols(8)", "packed_rows(8)", "packed_rows(4)")},
    # Rank 0: whole vectors into a scalar (one past the kernels' 32-element blocks, one in
    # their 8-element steps and tail, one below a vector), scalars, a scalar broadcast.
    **{f"{op}-to-scalar-{n}": _scalar(op, n) for op in ("sum", "max", "matmul")
       for n in (77, 13, 5)},
    **{f"dot-bf16-{n}": _scalar("matmul", n, "bf16") for n in (40, 9)},
    **{f"{op}-bf16-{n}": _scalar(op, n, "bf16") for op in ("sum", "max") for n in (93, 9)},
    **{f"row-{op}-bf16": f"func f(x: bf16[3, 40]) -> y: f32[3] {{\n    y = {op}(x)\n}}\n"
       for op in ("sum", "max")},
    **{f"{op}-scalars": _of_scalars(op)
       for op in ("add", "sub", "mul", "div", "max", "relu", "exp")},
    **{f"{op}-scalar-broadcast-{n}": _with_scalar(op, n) for op in ("add", "sub", "mul", "div")
       for n in (16, 11)},
    **{f"{op}-matrix-scalar-{m}x{n}": _matrix_with_scalar(op, m, n)
       for op in ("add", "sub", "mul", "div") for m, n in ((2, 16), (3, 13))},
    "sum": _reduce("sum", 3, 40),
    "max": _reduce("max", 3, 40),
    "softmax": _unary("softmax", 3, 32),
    "softmax-tail": _unary("softmax", 2, 10),
    # bf16 rows into f32: widened as the row's maximum is subtracted (vector and tail).
    **{f"softmax-bf16-{m}x{n}": (
        f"func f(x: bf16[{m}, {n}]) -> y: f32[{m}, {n}] {{\n    y = softmax(x)\n}}\n"
    ) for m, n in ((3, 32), (2, 13))},
}  # fmt: skip

GRAPHS = {
    "dense_relu": (
        "func dense_relu(x: f32[4, 16], w: f32[16, 16], b: f32[16]) -> y: f32[4, 16] {\n"
        "    y = relu(add(matmul(x, w), b))\n}\n"
    ),
    "mlp": (
        "func mlp(x: f32[2, 16], w1: f32[16, 16], w2: f32[16, 8]) -> y: f32[2, 8] {\n"
        "    h = relu(matmul(x, w1))\n    y = matmul(h, w2)\n}\n"
    ),
    "attention": (
        "func attention(q: f32[4, 8], kt: f32[8, 16], v: f32[16, 8]) -> o: f32[4, 8] {\n"
        "    o = matmul(softmax(matmul(q, kt)), v)\n}\n"
    ),
    # Found by benchmarks/fuzz.py: softmax's row must stay whole inside a graph too (tiling
    # the graph along it summed each tile on its own).
    "softmax-of-add-tail": (
        "func g(a: f32[1, 19]) -> y: f32[1, 19] {\n    y = softmax(add(a, a))\n}\n"
    ),
    # A bf16 softmax's f32 result read by a product.
    "bf16-softmax-matmul": (
        "func g(x: bf16[3, 20], v: f32[20, 5]) -> z: f32[3, 5] {\n"
        "    s = softmax(x)\n    z = matmul(s, v)\n}\n"
    ),
    # Elementwise ops on rank-1 results: a row's log-sum-exp-like statistics.
    "vector-statistics": (
        "func g(a: f32[5, 12]) -> y: f32[5] {\n    m = max(a)\n"
        "    y = add(exp(sub(sum(a), m)), relu(m))\n}\n"
    ),
    # A bf16 product inside a graph is computed in f32 (its inputs' dtype has no kernel).
    "bf16-dense-relu": (
        "func g(x: bf16[3, 16], w: bf16[16, 16], b: f32[16]) -> y: f32[3, 16] {\n"
        "    y = relu(add(matmul(x, w), b))\n}\n"
    ),
    # One token through a dense layer: a vector times a matrix, then a bias and ReLU.
    "dense-relu-of-a-vector": (
        "func g(x: f32[16], w: f32[16, 24], b: f32[24]) -> y: f32[24] {\n"
        "    y = relu(add(matmul(x, w), b))\n}\n"
    ),
    # One token through two layers, the second a matrix times the hidden vector.
    "mlp-of-a-vector": (
        "func g(x: f32[12], w1: f32[12, 20], w2: f32[9, 20]) -> y: f32[9] {\n"
        "    h = relu(matmul(x, w1))\n    y = matmul(w2, h)\n}\n"
    ),
    # Scalars in a graph: a vector's softmax through its maximum and sum (rank 0), each
    # broadcast back along the vector.
    "softmax-of-a-vector": (
        "func g(x: f32[21]) -> y: f32[21] {\n    m = max(x)\n    e = exp(sub(x, m))\n"
        "    y = div(e, sum(e))\n}\n"
    ),
    "dot-of-products": (
        "func g(w: f32[9, 20], x: f32[20], v: f32[9]) -> y: f32[] {\n"
        "    y = relu(matmul(v, matmul(w, x)))\n}\n"
    ),
    "sum-of-row-sums": "func g(a: f32[6, 10]) -> y: f32[] {\n    y = sum(sum(a))\n}\n",
    "matrix-over-its-total": (
        "func g(a: f32[5, 12]) -> y: f32[5, 12] {\n    y = div(a, sum(sum(a)))\n}\n"
    ),
    "exp-of-sum": (
        "func g(a: f32[2, 8], b: f32[2, 8]) -> y: f32[2] {\n    y = sum(exp(sub(a, b)))\n}\n"
    ),
}


def _synthesize_and_check(ctx: SynthesisContext, text: str, tmp_path: Path) -> None:
    (func,) = parse_spec_file("<test>", text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    source = lower_to_c("ops", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)


@pytest.mark.runs_code
@pytest.mark.parametrize("text", list(SINGLE_OPS.values()), ids=list(SINGLE_OPS))
def test_each_op_matches_numpy(ctx: SynthesisContext, text: str, tmp_path: Path) -> None:
    _synthesize_and_check(ctx, text, tmp_path)


@pytest.mark.runs_code
@pytest.mark.parametrize("text", list(GRAPHS.values()), ids=list(GRAPHS))
def test_each_graph_matches_numpy(ctx: SynthesisContext, text: str, tmp_path: Path) -> None:
    _synthesize_and_check(ctx, text, tmp_path)
