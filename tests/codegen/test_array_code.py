"""Index notation as array code agrees with the op's reference, on NumPy and on JAX.

* Every op of the core rule set, and products written other ways (transposed operands and
  output, a constant factor, three factors, a matrix-vector product, a reduction inside an
  expression), as NumPy code and as JAX code under ``jax.jit``, matches ``OpDef.reference``
  on random inputs with sizes that differ per index variable (a wrong axis shows).
* The graphs of the examples match their reference within the tolerance ``bench`` checks
  peers with.
* The code is what a user writes: a product of two matrices is one ``matmul`` (transposes
  are views), a softmax takes one row maximum and one ``exp``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from morello.codegen.array_code import array_function
from morello.codegen.harness import compare, random_inputs, reference, tolerance
from morello.context import SynthesisContext, make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.rules.graph import GraphOp
from morello.rules.index_notation import OpDef

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("dense_relu", "mlp", "softmax", "attention")

HAS_JAX = importlib.util.find_spec("jax") is not None
NO_JAX = "JAX is not installed (pip install 'morello[jax]')"

# Products and reductions written other ways than the core rules write them.
OPS = """\
op mm_tt(a[k, m], b[n, k]) -> c[m, n] = sum(k) a[k, m] * b[n, k]
op mm_out_t(a[m, k], b[k, n]) -> c[n, m] = sum(k) a[m, k] * b[k, n]
op scaled(a[m, k], b[k, n]) -> c[m, n] = sum(k) 2 * a[m, k] * b[k, n]
op three(a[i, k], b[j, k], d[i, k]) -> c[i, j] = sum(k) a[i, k] * b[j, k] * d[i, k]
op matvec(a[i, k], x[k]) -> y[i] = sum(k) a[i, k] * x[k]
op vecmat(x[k], a[k, j]) -> y[j] = sum(k) x[k] * a[k, j]
op colmax(a[i, j]) -> c[j] = max(i) a[i, j]
op normalize(x[i, j]) -> y[i, j] = x[i, j] / (sum(k) x[i, k] * x[i, k] + 1)
op outer(a[i], b[j]) -> c[i, j] = a[i] * b[j]
op bias_cols(a[i, j], b[i]) -> c[i, j] = max(a[i, j] + b[i], 0)
"""


@pytest.fixture(scope="module")
def extra_ctx(target_name: str, tmp_path_factory: pytest.TempPathFactory) -> SynthesisContext:
    path = tmp_path_factory.mktemp("ops") / "variants.rules"
    path.write_text(OPS, encoding="utf-8")
    return make_context(target_name, extra_rules=[path])


def _modules() -> list[Any]:
    mods: list[Any] = [pytest.param("numpy", id="numpy")]
    mods.append(pytest.param("jax", id="jax", marks=pytest.mark.skipif(not HAS_JAX, reason=NO_JAX)))
    return mods


def _run(op: OpDef | GraphOp, shapes: list[tuple[int, ...]], inputs: list[np.ndarray], lib: str):
    if lib == "numpy":
        return np.asarray(array_function(op, shapes, np, np.float32)(*inputs))
    import jax
    import jax.numpy as jnp

    fn = jax.jit(array_function(op, shapes, jnp, np.float32))
    return np.asarray(fn(*inputs))


def _check_op(op: OpDef, lib: str, rng: np.random.Generator) -> None:
    sizes = {v: 3 + i for i, v in enumerate(op.index_vars)}
    shapes = [op.operand_shape(i, sizes) for i in range(len(op.operands))]
    # Magnitudes in [0.5, 1.5) with either sign: no quotient by a value near zero.
    inputs = [
        (rng.uniform(0.5, 1.5, s) * rng.choice([-1, 1], s)).astype(np.float32) for s in shapes[:-1]
    ]
    want = op.reference(inputs, np.zeros(shapes[-1]))
    got = _run(op, shapes, inputs, lib)
    assert got.shape == shapes[-1], op.name
    assert got.dtype == np.float32, op.name
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op.name)


@pytest.mark.parametrize("lib", _modules())
def test_every_core_op_as_array_code_matches_its_reference(ctx: SynthesisContext, lib: str) -> None:
    rng = np.random.default_rng(0)
    checked = 0
    for key in ctx.ruleset.ops:
        op = ctx.ruleset.ops[key]
        assert isinstance(op, OpDef), key
        _check_op(op, lib, rng)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("lib", _modules())
@pytest.mark.parametrize(
    "name",
    ["mm_tt", "mm_out_t", "scaled", "three", "matvec", "vecmat", "colmax", "normalize", "outer",
     "bias_cols"],
)  # fmt: skip
def test_products_and_reductions_written_otherwise_match(
    extra_ctx: SynthesisContext, name: str, lib: str
) -> None:
    op = extra_ctx.ruleset.ops[name]
    assert isinstance(op, OpDef)
    _check_op(op, lib, np.random.default_rng(1))


def _example(ctx: SynthesisContext, name: str) -> tuple[Any, OpDef | GraphOp]:
    (func,) = parse_spec_file(ROOT / "examples" / f"{name}.lark").funcs
    program = build_program(func, ctx)
    return program, ctx.ruleset.ops[program.spec.op]


@pytest.mark.parametrize("lib", _modules())
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_graphs_as_array_code_are_within_the_bench_tolerance(
    ctx: SynthesisContext, name: str, lib: str
) -> None:
    program, op = _example(ctx, name)
    inputs = random_inputs(program, ctx)
    args = [inputs[n] for n in program.operand_params[:-1]]
    got = _run(op, [t.shape for t in program.spec.operands], args, lib)
    cmp = compare(got, reference(program, inputs, ctx), tolerance(program, inputs, ctx))
    assert cmp.ok, (name, cmp)


def test_array_code_is_what_a_user_writes(ctx: SynthesisContext) -> None:
    def calls(name: str) -> list[str]:
        program, op = _example(ctx, name)
        shapes = [t.shape for t in program.spec.operands]
        return list(array_function(op, shapes, np, np.float32).calls)

    assert calls("dense_relu") == ["matmul", "add", "maximum"]
    assert calls("mlp") == ["matmul", "maximum", "matmul"]
    softmax = calls("softmax")
    assert [c for c in softmax if c not in ("reshape", "transpose")] == [
        "max", "subtract", "exp", "sum", "divide",
    ]  # fmt: skip
    assert calls("attention") == ["matmul", *softmax, "matmul"]


def test_transposed_products_are_one_matmul_of_views(extra_ctx: SynthesisContext) -> None:
    op = extra_ctx.ruleset.ops["mm_tt"]
    fn = array_function(op, [(5, 3), (4, 5), (3, 4)], np, np.float32)
    assert fn.calls == ("transpose", "transpose", "matmul")
    three = extra_ctx.ruleset.ops["three"]
    assert "einsum" in array_function(three, [(3, 5), (4, 5), (3, 5), (3, 4)], np, np.float32).calls


def test_fills_have_the_output_shape_and_dtype(ctx: SynthesisContext) -> None:
    for key in ctx.ruleset.ops:
        op = ctx.ruleset.ops[key]
        if op.inputs:
            continue
        shape = (3, 4)[: len(op.output.indices)]
        out = array_function(op, [shape], np, np.float32)()
        assert out.shape == shape and out.dtype == np.float32, key
