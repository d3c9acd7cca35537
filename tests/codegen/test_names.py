"""C names: fresh names never collide with (or shadow) parameters, whatever they are called."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.codegen.names import Names
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize


def test_names_fresh_counts_per_prefix_in_first_use_order() -> None:
    names = Names()
    assert [names.fresh("v"), names.fresh("r"), names.fresh("v"), names.fresh("v")] == [
        "v0",
        "r0",
        "v1",
        "v2",
    ]


def test_names_fresh_skips_reserved_names_and_their_element_names() -> None:
    # Register tiles declare v0_0, v0_1, ...: v1 is unusable when a parameter is called v1_3.
    names = Names({"v0", "v1_3", "i0"})
    assert names.fresh("v") == "v2"
    assert names.fresh("i") == "i1"
    assert names.fresh("r") == "r0"


@pytest.mark.runs_code
@pytest.mark.parametrize("b_layout", ["row_major", "col_major"])
def test_names_parameters_named_like_locals_still_match_numpy(
    ctx: SynthesisContext, tmp_path: Path, b_layout: str
) -> None:
    # Parameters named like the emitter's register, loop and buffer variables.
    text = (
        f"func mm_{b_layout}(v1_0: f32[8, 8], r0_1: f32[8, 8] {b_layout}) -> i0: f32[8, 8] {{\n"
        "    i0 = matmul(v1_0, r0_1)\n"
        "}\n"
    )
    program = build_program(parse_spec_file("names.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    c_text = lower_to_c("names", [(program, impl)], ctx).c_text
    lib = compile_shared(c_text, ctx.target, tmp_path, "names")
    harness.check(lib, program, ctx)  # raises CheckFailed on a mismatch


@pytest.mark.runs_code
def test_names_parameter_named_like_a_called_function_is_renamed(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    # Every target's scalar exponential calls the C library's expf (rules/kernels/
    # scalar_exp.rules), which a parameter called expf would shadow in the definition.
    text = "func ex(expf: f32[3, 5]) -> y: f32[3, 5] {\n    y = exp(expf)\n}\n"
    program = build_program(parse_spec_file("names.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    out = lower_to_c("names", [(program, impl)], ctx)
    assert "expf(" in out.c_text
    assert "void ex(const float *restrict expf_arg, float *restrict y)" in out.c_text
    # The prototype keeps the spec file's name: it shadows nothing there.
    assert "void ex(const float *expf, float *y);" in out.h_text
    lib = compile_shared(out.c_text, ctx.target, tmp_path, "names")
    harness.check(lib, program, ctx)  # raises CheckFailed on a mismatch


def test_names_cxx_keyword_parameters_are_respelled_in_the_header(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    # C allows parameters called new, this and class; the header, which C++ includes too,
    # spells them otherwise in the prototype (new_1: new_ is taken by another parameter).
    text = (
        "func upd(new: f32[4, 4], new_: f32[4, 4], this: f32[4, 4]) -> class: f32[4, 4] {\n"
        "    class = add(add(new, new_), this)\n"
        "}\n"
    )
    program = build_program(parse_spec_file("names.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    out = lower_to_c("upd", [(program, impl)], ctx)
    assert (
        "void upd(const float *new_1, const float *new_, const float *this_, float *class_);"
        in out.h_text
    )
    assert "const float *restrict new," in out.c_text  # the definition keeps the C names
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "upd.h").write_text(out.h_text, encoding="utf-8")
    (tmp_path / "use.cpp").write_text('#include "upd.h"\nint main() { return 0; }\n')
    result = subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", str(tmp_path / "use.cpp")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.runs_code
def test_names_timing_harnesses_take_parameters_named_like_their_locals(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    # bench's timing loop declares iters, t0, t1 and it; both it and fidelity's pair
    # harness name the buffers arg0, arg1, ..., so any spec's names compile.
    from morello.codegen.bench import timing_harness
    from morello.codegen.fidelity import pair_harness
    from morello.codegen.timing import PRELUDE

    text = (
        "func f(iters: f32[4, 4], t0: f32[4, 4]) -> it: f32[4, 4] {\n    it = add(iters, t0)\n}\n"
    )
    program = build_program(parse_spec_file("names.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    c_text = lower_to_c("names", [(program, impl)], ctx).c_text
    harnesses = timing_harness(program, ctx) + pair_harness(program, "f", "f")
    compile_shared(PRELUDE + c_text + "\n" + harnesses, ctx.target, tmp_path, "names")
