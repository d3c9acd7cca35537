"""A packed buffer in generated code: zen1 packs a column-major B into a row-major L1 buffer,
which the vector FMA kernels read; the program is compiled and compared with NumPy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from spec_library import compile_spec_text

from morello.codegen import harness
from morello.context import SynthesisContext
from morello.nodes import KernelAction, MoveAction


@pytest.mark.runs_code
def test_packed_program_matches_numpy(ctx: SynthesisContext, tmp_path: Path) -> None:
    if ctx.target.name != "zen1":
        pytest.skip("zen1's L1 packing")
    text = (
        "func col_b(a: f32[8, 8], b: f32[8, 8] col_major) -> c: f32[8, 8] {\n"
        "    c = matmul(a, b)\n}\n"
    )
    lib, program, impl = compile_spec_text("packing", text, ctx, {}, tmp_path)["col_b"]
    packs = [
        n.action
        for n in impl.walk()
        if isinstance(n.action, MoveAction)
        and n.action.new_buffer
        and n.action.dest.level.name == "L1"
    ]
    assert [(m.operand, m.layout) for m in packs] == [(1, "row_major")]
    kernels = {n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)}
    assert "bcast_fma_f32x8" in kernels, kernels
    harness.check(lib, program, ctx, seed=3)  # raises CheckFailed on a mismatch
