"""Parallel loops in C: OpenMP pragmas, compiled with the target's OpenMP flags, run and
compared with NumPy; the header says the C needs OpenMP."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from morello.codegen.compile import compile_shared, needs_openmp
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize

SPECS = """\
parallel func mm_13x8x16(a: f32[13, 8], b: f32[8, 16]) -> c: f32[13, 16] {
    c = matmul(a, b)
}
parallel func mm_7x4x24(a: f32[7, 4], b: f32[4, 24] col_major) -> c: f32[7, 24] {
    c = matmul(a, b)
}
parallel func mm_40x16x24(a: f32[40, 16], b: f32[16, 24]) -> c: f32[40, 24] {
    c = matmul(a, b)
}
parallel func dense_relu(x: f32[12, 8], w: f32[8, 8], b: f32[8]) -> y: f32[12, 8] {
    y = relu(add(matmul(x, w), b))
}
func serial(a: f32[8, 8], b: f32[8, 8]) -> c: f32[8, 8] {
    c = matmul(a, b)
}
"""


def _threaded(ctx: SynthesisContext, threads: int) -> SynthesisContext:
    # Free fork/joins, so that even these small products go parallel.
    return attrs.evolve(
        ctx, threads=threads, coefficients=attrs.evolve(ctx.coefficients, fork_join=0)
    )


@pytest.mark.target("zen1")
@pytest.mark.runs_code
@pytest.mark.parametrize("threads", [2, 3])
def test_parallel_c_compiles_runs_and_matches_numpy(
    ctx: SynthesisContext, tmp_path: Path, threads: int
) -> None:
    if ctx.target.processors < threads:
        pytest.skip(f"target {ctx.target.name} has {ctx.target.processors} processors")
    c = _threaded(ctx, threads)
    memo: dict = {}
    solved = []
    for func in parse_spec_file("<parallel>", SPECS).funcs:
        program = build_program(func, c)
        impl, _ = synthesize(program.spec, c, memo)
        solved.append((program, impl))
        assert impl.threads() == (1 if program.name == "serial" else threads), program.name
    source = lower_to_c("parallel", solved, c)
    assert needs_openmp(source.c_text)
    assert f"#pragma omp parallel for num_threads({threads}) schedule(static)" in source.c_text
    assert f"/* Parallel loops on up to {threads} threads: compile with OpenMP" in source.c_text
    # The serial function's comment says nothing of OpenMP; the others' do.
    assert source.h_text.count(f"Runs parallel loops on up to {threads} threads") == 4
    lib = compile_shared(source.c_text, c.target, tmp_path, "parallel")
    flags = " ".join(c.target.compiler.openmp_flags)
    assert flags in (tmp_path / "parallel.log").read_text().splitlines()[0]
    for program, _ in solved:
        check(lib, program, c)


def test_serial_c_has_no_openmp(ctx: SynthesisContext) -> None:
    (func,) = parse_spec_file("<serial>", SPECS).funcs[-1:]
    program = build_program(func, ctx)
    impl, _ = synthesize(program.spec, ctx, {})
    source = lower_to_c("serial", [(program, impl)], ctx)
    assert not needs_openmp(source.c_text)
    assert "OpenMP" not in source.c_text + source.h_text


def test_parallel_c_is_deterministic(ctx: SynthesisContext) -> None:
    c = _threaded(ctx, 2)
    (func,) = parse_spec_file("<p>", SPECS).funcs[:1]
    program = build_program(func, c)
    texts = {lower_to_c("p", [(program, synthesize(program.spec, c, {})[0])], c).c_text}
    texts.add(lower_to_c("p", [(program, synthesize(program.spec, c, {})[0])], c).c_text)
    assert len(texts) == 1
