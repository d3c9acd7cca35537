"""Fixtures of the search tests: root Specs of matrix products built from spec-file text."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.spec import Spec

MatmulSpec = Callable[..., Spec]


def matmul_text(m: int, k: int, n: int, b_layout: str = "") -> str:
    """Spec-file text of ``c = matmul(a, b)`` over f32 operands in main memory."""
    b_mod = f" {b_layout}" if b_layout else ""
    return (
        f"func mm_{m}x{k}x{n}(a: f32[{m}, {k}], b: f32[{k}, {n}]{b_mod}) -> c: f32[{m}, {n}] {{\n"
        "    c = matmul(a, b)\n"
        "}\n"
    )


@pytest.fixture(scope="session")
def matmul_source() -> Callable[..., str]:
    """``matmul_source(m, k, n, b_layout="")``: the spec-file text ``matmul_spec`` parses."""
    return matmul_text


@pytest.fixture(scope="session")
def matmul_spec(ctx: SynthesisContext) -> MatmulSpec:
    """``matmul_spec(m, k, n, b_layout="")``: the root Spec of an f32 matrix product."""

    def build(m: int, k: int, n: int, b_layout: str = "") -> Spec:
        text = matmul_text(m, k, n, b_layout)
        (func,) = parse_spec_file(f"mm_{m}x{k}x{n}.lark", text).funcs
        return build_program(func, ctx).spec

    return build
