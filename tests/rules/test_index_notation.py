"""OpDef: what the engine derives from one line of index notation.

Mostly the built-in ``matmul``, ``zero`` and ``move`` of the target's rule set: index
variables, the reduction variable, which operand dims each variable runs along, operand
shapes and tile footprints, FLOPs, and the NumPy reference (overwriting and accumulating).
A few ops parsed from text cover the non-einsum (broadcast) evaluation path.
"""

from __future__ import annotations

import numpy as np
import pytest

from morello.context import SynthesisContext
from morello.lang.rule_file import parse_rule_file
from morello.rules.index_notation import OpDef

MATMUL_LINE = "op matmul(a[m, k], b[k, n]) -> c[m, n] = sum(k) a[m, k] * b[k, n]"


def parse_op(line: str) -> OpDef:
    (opdef,) = parse_rule_file("test.rules", line + "\n").ops
    return opdef


@pytest.fixture
def matmul(ctx: SynthesisContext) -> OpDef:
    return ctx.ruleset.ops["matmul"]


def test_index_notation_builtin_matmul_equals_parsed_line(matmul: OpDef) -> None:
    # Locations are not part of equality, so the built-in declaration equals the same text.
    assert matmul == parse_op(MATMUL_LINE)


def test_index_notation_matmul_index_and_reduction_vars(matmul: OpDef) -> None:
    assert matmul.operand_names == ("a", "b", "c")
    assert matmul.index_vars == ("m", "n", "k")  # output indices first
    assert matmul.reduction_vars == ("k",)
    assert not matmul.is_identity
    assert [matmul.rank(i) for i in range(3)] == [2, 2, 2]


def test_index_notation_matmul_operands_using(matmul: OpDef) -> None:
    assert matmul.operands_using("m") == ((0, 0), (2, 0))
    assert matmul.operands_using("n") == ((1, 1), (2, 1))
    assert matmul.operands_using("k") == ((0, 1), (1, 0))


def test_index_notation_matmul_sizes_and_tile_footprint(matmul: OpDef) -> None:
    assert matmul.sizes([(3, 5), (5, 7), (3, 7)]) == {"m": 3, "k": 5, "n": 7}
    # An inconsistent shape reports the first conflicting variable: (var, had, got).
    assert matmul.sizes([(3, 5), (6, 7), (3, 7)]) == ("k", 5, 6)
    # A 4x8 output tile of a reduction over 16 needs a 4x16 tile of a and 16x8 of b.
    tile = {"m": 4, "n": 8, "k": 16}
    assert [matmul.operand_shape(i, tile) for i in range(3)] == [(4, 16), (16, 8), (4, 8)]


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (2, 3, 4), (8, 8, 8), (64, 32, 16)])
def test_index_notation_matmul_flops(matmul: OpDef, m: int, k: int, n: int) -> None:
    assert matmul.flops({"m": m, "k": k, "n": n}) == 2 * m * k * n


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (3, 5, 7), (16, 8, 4)])
def test_index_notation_matmul_reference_is_a_at_b(matmul: OpDef, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    got = matmul.reference([a, b], np.zeros((m, n)))
    assert got.dtype == np.float64  # float64 accumulation
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12)


def test_index_notation_reference_infers_output_shape_from_inputs(matmul: OpDef) -> None:
    a, b = np.ones((3, 5)), np.ones((5, 7))
    np.testing.assert_allclose(matmul.reference([a, b]), a @ b)


def test_index_notation_matmul_accum_reference_adds_to_output(matmul: OpDef) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 5))
    out = rng.uniform(-1, 1, (3, 5))
    before = out.copy()
    got = matmul.reference([a, b], out, accum=True)
    np.testing.assert_allclose(got, before + a @ b, rtol=1e-12)
    np.testing.assert_array_equal(out, before)  # the output argument is not modified


def test_index_notation_zero_reference(ctx: SynthesisContext) -> None:
    zero = ctx.ruleset.ops["zero"]
    assert zero.inputs == ()
    assert zero.index_vars == ("i", "j")
    assert zero.reduction_vars == ()
    assert not zero.is_identity
    got = zero.reference([], np.full((3, 4), 7.0))
    np.testing.assert_array_equal(got, np.zeros((3, 4)))
    np.testing.assert_array_equal(zero.reference([], np.ones((2, 2)), accum=True), np.ones((2, 2)))


def test_index_notation_move_reference_and_identity(ctx: SynthesisContext) -> None:
    move = ctx.ruleset.ops["move"]
    assert move.is_identity
    assert move.reduction_vars == ()
    assert move.operands_using("i") == ((0, 0), (1, 0))
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(move.reference([src], np.zeros((3, 4))), src)
    assert move.flops({"i": 3, "j": 4}) == 0
    assert ctx.ruleset.copy_op(2) == "move"


def test_index_notation_transpose_uses_broadcast_path() -> None:
    transpose = parse_op("op transpose(a[i, j]) -> c[j, i] = a[i, j]")
    assert not transpose.is_identity  # the indices are permuted
    assert transpose.index_vars == ("j", "i")
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(transpose.reference([a], np.zeros((3, 2))), a.T)


def test_index_notation_non_product_expression_reference() -> None:
    op = parse_op("op relu_add(x[i, j], y[i, j]) -> z[i, j] = max(x[i, j] + y[i, j], 0)")
    assert op.flops({"i": 2, "j": 3}) == 2 * 6  # one add and one max per point
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    y = np.array([[0.5, 0.5, -4.0], [1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(op.reference([x, y], np.zeros((2, 3))), np.maximum(x + y, 0))


def test_index_notation_row_sum_reduces_over_the_missing_index() -> None:
    op = parse_op("op rowsum(a[i, j]) -> c[i] = sum(j) a[i, j]")
    assert op.reduction_vars == ("j",)
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(op.reference([a], np.zeros(3)), a.sum(axis=1))
    # sum(j) (a + a) is not a product, so it is evaluated by broadcasting.
    doubled = parse_op("op rowsum2(a[i, j]) -> c[i] = sum(j) (a[i, j] + a[i, j])")
    np.testing.assert_allclose(doubled.reference([a], np.zeros(3)), 2 * a.sum(axis=1))


def test_division_exp_and_infinity_evaluate_like_numpy() -> None:
    rng = np.random.default_rng(3)
    x, s = rng.standard_normal((3, 4)), rng.uniform(1, 2, 3)
    div = parse_op("op div_rows(x[i, j], s[i]) -> y[i, j] = x[i, j] / s[i]")
    np.testing.assert_allclose(div.reference([x, s], np.zeros((3, 4))), x / s[:, None])
    ex = parse_op("op exps(x[i, j], m[i]) -> y[i, j] = exp(x[i, j] - m[i])")
    np.testing.assert_allclose(ex.reference([x, s], np.zeros((3, 4))), np.exp(x - s[:, None]))
    lowest = parse_op("op lowest() -> y[i] = 0 - inf")
    assert (lowest.reference([], np.zeros(3)) == -np.inf).all()
    assert div.combiner == ex.combiner == "sum"  # no reduction: accumulating adds
    norm = parse_op("op norm(x[i, j], z[i, k]) -> y[i, j] = x[i, j] / (sum(k) z[i, k])")
    assert norm.combiner is None
    np.testing.assert_allclose(norm.reference([x, x], np.zeros((3, 4))), x / x.sum(1)[:, None])


def test_max_reduction_accumulates_by_keeping_the_larger() -> None:
    rowmax = parse_op("op rowmax(x[i, j]) -> y[i] = max(j) x[i, j]")
    relu = parse_op("op relu(x[i, j]) -> y[i, j] = max(x[i, j], 0)")
    x = np.random.default_rng(4).standard_normal((3, 5))
    assert rowmax.reduction_vars == ("j",) and rowmax.combiner == "max"
    np.testing.assert_allclose(rowmax.reference([x], np.zeros(3)), x.max(axis=1))
    start = np.array([10.0, -10.0, 0.0])
    np.testing.assert_allclose(
        rowmax.reference([x], start, accum=True), np.maximum(start, x.max(axis=1))
    )
    assert relu.combiner == "sum" and relu.reduction_vars == ()
    np.testing.assert_allclose(relu.reference([x], np.zeros((3, 5))), np.maximum(x, 0))


def test_sum_reduction_accumulates_by_adding(matmul: OpDef) -> None:
    assert matmul.combiner == "sum"
