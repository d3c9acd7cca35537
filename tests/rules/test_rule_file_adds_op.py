"""Extensibility: a new elementwise op, with its kernels and rewrites, is a rule file alone.

``softplus.rules`` in ``tmp_path`` declares ``softplus(x) = exp(x) + 1`` and an overload that
adds a row vector first, a scalar kernel and an 8-wide AVX2 kernel for it, and the moves
it may use; the engine (``morello/``), the built-in rules and the targets are untouched.
A spec file calling it (alone, with a broadcast row, and inside a graph after a matmul) is
synthesized, its Impl calls the new kernels, and the compiled code matches NumPy, whose
reference comes from the new line of index notation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import KernelAction
from morello.search.solve import synthesize

pytestmark = pytest.mark.runs_code

RULES = """\
# Rule set "softplus": a made-up op, its kernels and the moves it may use.
requires avx2, fma
include <math.h>
include <immintrin.h>

op softplus(a[i, j]) -> c[i, j] = exp(a[i, j]) + 1
op softplus(a[i, j], b[j]) -> c[i, j] = exp(a[i, j] + b[j]) + 1

rewrite move for softplus layouts *

kernel softplus_f32:
    c: f32[1, 1] @RF|L1 = softplus(a: f32[1, 1] @RF|L1)
    cost 20 * scalar_op
    c "{c} = expf({a}) + 1.0f;"

kernel softplus_row_f32:
    c: f32[1, 1] @RF|L1 = softplus(a: f32[1, 1] @RF|L1, b: f32[1] @RF|L1)
    cost 20 * scalar_op
    c "{c} = expf({a} + {b}) + 1.0f;"

kernel vsoftplus_f32x8:
    c: f32[1, 8] @VRF v8 = softplus(a: f32[1, 8] @VRF v8)
    cost 8 * vector_op
    c "{"
      "    float sp_in[8], sp_out[8];"
      "    _mm256_storeu_ps(sp_in, {a});"
      "    for (int sp_i = 0; sp_i < 8; sp_i++) sp_out[sp_i] = expf(sp_in[sp_i]) + 1.0f;"
      "    {c} = _mm256_loadu_ps(sp_out);"
      "}"
"""

SPECS = {
    "alone": "func f(x: f32[4, 16]) -> y: f32[4, 16] {\n    y = softplus(x)\n}\n",
    "row": "func f(x: f32[3, 5], b: f32[5]) -> y: f32[3, 5] {\n    y = softplus(x, b)\n}\n",
    "graph": (
        "func f(x: f32[2, 8], w: f32[8, 8]) -> y: f32[2, 8] {\n    y = softplus(matmul(x, w))\n}\n"
    ),
}


def _kernels(impl: Impl) -> set[str]:
    out = {impl.action.kernel} if isinstance(impl.action, KernelAction) else set()
    for child in impl.children:
        out |= _kernels(child)
    return out


@pytest.mark.parametrize("text", list(SPECS.values()), ids=list(SPECS))
def test_an_op_added_by_a_rule_file_is_synthesized(text: str, tmp_path: Path) -> None:
    rules = tmp_path / "softplus.rules"
    rules.write_text(RULES, encoding="utf-8")
    ctx = make_context("zen1", extra_rules=[rules])
    (func,) = parse_spec_file("<test>", text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    assert _kernels(impl) & {"softplus_f32", "softplus_row_f32", "vsoftplus_f32x8"}
    source = lower_to_c("softplus", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)  # raises if wrong
