"""Vector registers pinned after a move loads them (``VectorType.pin``).

A move into vector registers whose body reads each value more than once (a row of B that
every row of a register tile multiplies) is followed by the target's pin, so the compiler
keeps the loaded values in registers as the Impl says instead of folding the load into
every instruction that reads them. Values read once (a matvec's weights) are not pinned:
there folding the load is what the Impl means.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.search.solve import synthesize
from morello.target import VectorType


def test_a_pin_must_name_its_variable() -> None:
    with pytest.raises(ValueError, match="does not name"):
        VectorType(dtype="f32", lanes=8, c_type="__m256", pin='__asm__("" : "+x"(v));')


def _pin_template(ctx: SynthesisContext) -> str:
    pins = [vt.pin for vt in ctx.target.vector_types if vt.dtype == "f32" and vt.pin]
    if not pins:
        pytest.skip(f"target {ctx.target.name} pins no f32 vector registers")
    return pins[0]


def _program(ctx: SynthesisContext, m: int, k: int, n: int) -> Program:
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    return build_program(func, ctx)


def _c_text(program: Program, ctx: SynthesisContext) -> str:
    impl, _ = synthesize(program.spec, ctx, {})
    return lower_to_c("pin", [(program, impl)], ctx).c_text


def _pinned(c_text: str, template: str) -> set[str]:
    before, after = (re.escape(part) for part in template.split("{v}"))
    return set(re.findall(before + r"(\w+)" + after, c_text))


def _loaded_from(c_text: str, param: str) -> set[str]:
    """Variables assigned a vector loaded from ``param`` in place (``v = load(&b[...])``)."""
    return set(re.findall(rf"(\w+) = \w+\(&{param}\[", c_text))


def test_a_row_of_b_every_row_of_the_tile_reads_is_pinned(ctx: SynthesisContext) -> None:
    template = _pin_template(ctx)
    text = _c_text(_program(ctx, 4, 16, 16), ctx)
    rows = _loaded_from(text, "b")
    assert rows, "expected B's rows loaded into vector registers in place"
    assert rows <= _pinned(text, template)


def test_weights_a_matvec_reads_once_are_not_pinned(ctx: SynthesisContext) -> None:
    template = _pin_template(ctx)
    text = _c_text(_program(ctx, 1, 64, 64), ctx)
    weights = _loaded_from(text, "b")
    assert weights, "expected the weights loaded into vector registers in place"
    assert not weights & _pinned(text, template)


@pytest.mark.runs_code
@pytest.mark.parametrize("shape", [(4, 16, 16), (3, 40, 24), (1, 64, 64)])
def test_pinned_programs_match_numpy(
    ctx: SynthesisContext, tmp_path: Path, shape: tuple[int, int, int]
) -> None:
    _pin_template(ctx)
    program = _program(ctx, *shape)
    impl, _ = synthesize(program.spec, ctx, {})
    source = lower_to_c("pinned", [(program, impl)], ctx)
    lib = compile_shared(source.c_text, ctx.target, tmp_path / "pinned", "pinned")
    harness.check(lib, program, ctx, seed=5)  # raises CheckFailed on a mismatch
