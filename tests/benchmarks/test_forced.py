"""``benchmarks/forced.py``: a program whose first decisions are forced, the rest searched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import LoopAction
from morello.search.solve import synthesize

SPEC = "func f(a: f32[16, 32], b: f32[32, 24]) -> c: f32[16, 24] { c = matmul(a, b) }\n"


@pytest.mark.runs_code
def test_forced_prefix_is_kept_and_the_rest_searched(
    ctx: SynthesisContext, tmp_path: Path, benchmark_script: Callable[[str], ModuleType]
) -> None:
    forced = benchmark_script("forced")
    program = build_program(parse_spec_file("f.lark", SPEC).funcs[0], ctx)
    memo: dict = {}
    whole = forced.forced_impl(program.spec, ["tile_out: for m in 4 x 4"], ctx, memo)
    impl = whole.past_forced()  # a target with an L2 holds the whole Spec there first
    loop = impl.action
    assert isinstance(loop, LoopAction) and (loop.var, loop.step) == ("m", 4)
    # The loop's body (its only child) was searched: what the search makes of it alone.
    (body,) = impl.children
    assert body == synthesize(loop.body, ctx, {})[0]
    assert whole.cost >= synthesize(program.spec, ctx, {})[0].cost
    source = lower_to_c("f", [(program, whole)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), program, ctx)  # raises if wrong


def test_a_child_other_than_the_first_can_be_followed(
    ctx: SynthesisContext, benchmark_script: Callable[[str], ModuleType]
) -> None:
    forced = benchmark_script("forced")
    program = build_program(parse_spec_file("f.lark", SPEC).funcs[0], ctx)
    decisions = ["to_accum", "1@split: for k in 2 x 16"]
    impl = forced.forced_impl(program.spec, decisions, ctx, {}).past_forced()
    zero, accumulate = impl.children
    assert zero.spec.op == "zero"
    loop = accumulate.action
    assert isinstance(loop, LoopAction) and (loop.var, loop.step) == ("k", 16)


def test_a_decision_not_offered_is_an_error_listing_the_offers(
    ctx: SynthesisContext, benchmark_script: Callable[[str], ModuleType]
) -> None:
    forced = benchmark_script("forced")
    program = build_program(parse_spec_file("f.lark", SPEC).funcs[0], ctx)
    # The offers listed are those past a forced residency, where the decision applies.
    with pytest.raises(
        forced.NoSuchDecision,
        match=r"(?s)starts with 'tile_out: for q'.*offered:.*tile_out: for m in",
    ):
        forced.forced_impl(program.spec, ["tile_out: for q"], ctx, {})


def test_decisions_that_leave_no_implementation_are_a_one_line_error(
    tmp_path: Path, benchmark_script: Callable[[str], ModuleType], capsys
) -> None:
    forced = benchmark_script("forced")
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    # a's 4x32 block takes all 16 vector registers, leaving none for c's accumulators.
    decisions = [
        "tile_out: for m in 4 x 4",
        "move: operand 0 -> f32[4, 32] @L1",
        "move: operand 0 -> f32[4, 32] @VRF",
    ]
    assert forced.main([str(spec), *decisions]) == 2
    err = capsys.readouterr().err
    assert err.startswith("forced.py: error: no implementation of ") and err.count("\n") == 1
