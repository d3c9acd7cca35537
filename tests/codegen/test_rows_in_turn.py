"""An unrolled reduction around an unrolled loop over output registers, emitted interchanged
so that a streamed operand's rows are read in turn (``LoopAction._rows_in_turn``).

zen1 synthesizes a matvec's register block as 8 rows of the weights (``x`` in scalar
registers) around 6 registers of outputs. Emitted as nested, it reads a 192-byte run of each
row, then the next row; interchanged, each output register takes its 8 rows in turn, the
same additions in the same order. These tests check the order, that the interchange
changes no bit of the result, and that it leaves a tile read across its rows as it was.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.nodes.loop import LoopAction
from morello.search.solve import synthesize

pytestmark = pytest.mark.target("zen1")  # the block shape below is zen1's choice

#: ``acc = _mm256_fmadd_ps(_mm256_set1_ps(xreg), w, acc);``: (accumulator, x register).
_FMA = re.compile(r"(\w+) = _mm256_fmadd_ps\(_mm256_set1_ps\((\w+)\), \w+, \1\);")


def _matvec(ctx: SynthesisContext, k: int, n: int) -> tuple[Program, Impl]:
    text = f"func mv(x: f32[1, {k}], w: f32[{k}, {n}]) -> y: f32[1, {n}] {{\n"
    text += "    y = matmul(x, w)\n}\n"
    (func,) = parse_spec_file("mv.lark", text).funcs
    program = build_program(func, ctx)
    return program, synthesize(program.spec, ctx, {})[0]


def _c(program: Program, impl: Impl, ctx: SynthesisContext, name: str = "mv") -> str:
    return lower_to_c(name, [(program, impl)], ctx).c_text


def _nested(monkeypatch: pytest.MonkeyPatch) -> None:
    """Emit every unrolled loop nested, as before the interchange."""
    monkeypatch.setattr(LoopAction, "_rows_in_turn", lambda self, em, impl, views: None)


def test_each_output_register_takes_the_rows_in_turn(ctx: SynthesisContext) -> None:
    program, impl = _matvec(ctx, 32, 512)
    fmas = _FMA.findall(_c(program, impl, ctx))
    assert len(fmas) >= 16, "expected the register block's FMAs, unrolled"
    # Interchanged: one accumulator, 8 different rows (x registers), then the next one.
    first = fmas[:8]
    assert len({acc for acc, _ in first}) == 1
    assert len({x for _, x in first}) == 8
    assert fmas[8][0] != first[0][0]


def test_nested_emission_reads_a_run_of_each_row_first(
    ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order the interchange replaces (and that the test above would catch)."""
    program, impl = _matvec(ctx, 32, 512)
    _nested(monkeypatch)
    fmas = _FMA.findall(_c(program, impl, ctx))
    first = fmas[:6]
    assert len({x for _, x in first}) == 1  # one row, six output registers
    assert len({acc for acc, _ in first}) == 6


@pytest.mark.runs_code
@pytest.mark.parametrize("shape", [(32, 512), (64, 1024)])
def test_the_interchange_changes_no_bit(
    ctx: SynthesisContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int],
) -> None:
    program, impl = _matvec(ctx, *shape)
    turned = _c(program, impl, ctx)
    with monkeypatch.context() as m:
        _nested(m)
        nested = _c(program, impl, ctx)
    assert turned != nested, "expected the interchange to apply to this matvec"
    inputs = harness.random_inputs(program, ctx, seed=11)
    outputs = []
    for label, text in (("turned", turned), ("nested", nested)):
        lib = compile_shared(text, ctx.target, tmp_path / label, label)
        harness.check(lib, program, ctx, seed=11)  # raises CheckFailed on a mismatch
        outputs.append(harness.run(lib, program, inputs, ctx))
    assert np.array_equal(outputs[0], outputs[1])


@pytest.mark.target("neoverse_n1")
def test_a_tile_read_across_its_rows_is_left_nested(ctx: SynthesisContext) -> None:
    """neoverse_n1's 8x8x8 product keeps all of B in registers: its unrolled loop over k
    holds an unrolled loop over output rows, but A's tile is read down a column (rows 8
    floats apart, one float per row), so there is nothing to visit in turn. (Interchanged
    whenever the two loops nest, it did change: each row of C took its 8 FMAs in a row.)"""
    text = "func mm(a: f32[8, 8], b: f32[8, 8]) -> c: f32[8, 8] {\n    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("mm.lark", text).funcs
    program = build_program(func, ctx)
    impl = synthesize(program.spec, ctx, {})[0]
    turned = _c(program, impl, ctx, "mm")
    with pytest.MonkeyPatch.context() as m:
        _nested(m)
        assert _c(program, impl, ctx, "mm") == turned
