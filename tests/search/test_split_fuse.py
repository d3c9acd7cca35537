"""``split_fuse``: a graph's first reduction split, its last step fused with the rest.

``y = relu(add(matmul(x, w), b))`` split along k: the product over all but the last step
into a temporary, then a graph that computes the last step's product, adds the temporary
(the rule set's elementwise ``a + b``), the bias and the ReLU, so a tile of it can keep the
product in registers until the output is stored once. Checked piece by piece (what the rule
offers, and where it does not apply) and end to end (compiled and compared with NumPy).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.nodes import SplitFuseAction
from morello.rules.graph import GraphOp
from morello.rules.index_notation import Access, Func
from morello.search.expand import past_forced, spec_actions, under_forced
from morello.search.solve import synthesize


def dense(m: int, k: int, n: int) -> str:
    return (
        f"func f(x: f32[{m}, {k}], w: f32[{k}, {n}], b: f32[{n}]) -> y: f32[{m}, {n}] {{\n"
        "    y = relu(add(matmul(x, w), b))\n}\n"
    )


def program(ctx: SynthesisContext, text: str) -> Program:
    (func,) = parse_spec_file("<graph>", text).funcs
    return build_program(func, ctx)


def splits(spec, ctx: SynthesisContext) -> list[SplitFuseAction]:  # type: ignore[no-untyped-def]
    return [a for a in spec_actions(spec, ctx) if isinstance(a, SplitFuseAction)]


def test_split_fuse_is_offered_for_a_dense_layer(ctx: SynthesisContext) -> None:
    spec = past_forced(program(ctx, dense(4, 256, 8)).spec, ctx)
    actions = splits(spec, ctx)
    # core.rules' pow2_half: the last step is half the reduction (one size only).
    assert {(a.at, a.step) for a in actions} == {(128, 128)}
    for a in actions:
        ((_, temp),) = a.temporaries
        assert temp.shape == (4, 8) and not temp.level.counts_registers
        first, rest = a.stages
        assert first.op == "matmul" and not first.accum
        assert first.operands == (*(t for t in first.operands[:2]), temp)
        assert first.operands[0].shape == (4, a.at) and first.operands[1].shape == (a.at, 8)
        # The rest: the last step's product, plus the temporary, plus the bias, then ReLU.
        graph = ctx.ruleset.ops[rest.op]
        assert isinstance(graph, GraphOp)
        assert [s.op for s in graph.statements] == ["matmul", "add", "add/2.1.2", "relu"]
        assert rest.operands[0].shape == (4, a.step) and rest.operands[1].shape == (a.step, 8)
        assert rest.operands[2] == temp and rest.operands[3:] == spec.operands[2:]
        # Split once: the second stage already adds a partial result.
        assert splits(past_forced(rest, ctx), ctx) == []


def test_split_fuse_needs_an_input_only_the_reduction_reads(ctx: SynthesisContext) -> None:
    text = (
        "func f(x: f32[4, 128], w: f32[128, 128]) -> y: f32[4, 128] {\n"
        "    y = add(matmul(x, w), x)\n}\n"
    )
    assert splits(past_forced(program(ctx, text).spec, ctx), ctx) == []


def test_split_fuse_is_not_offered_below_the_smallest_step(ctx: SynthesisContext) -> None:
    assert splits(past_forced(program(ctx, dense(4, 127, 8)).spec, ctx), ctx) == []
    assert [a.step for a in splits(past_forced(program(ctx, dense(4, 128, 8)).spec, ctx), ctx)]


ROW_MAX = "func f(x: f32[4, 256]) -> y: f32[4] {\n    y = exp(max(x))\n}\n"
# More forms for the compiled check: a sum reduction split unevenly (66 + 64), the first
# of two statements (an MLP), products of bf16 inputs (the partial sums in f32), and
# column-major operands (the split views step along the other dimension).
ROW_SUM = "func f(x: f32[5, 130]) -> y: f32[5] {\n    y = relu(sum(x))\n}\n"
MLP = (
    "func f(x: f32[2, 128], w1: f32[128, 8], w2: f32[8, 8]) -> y: f32[2, 8] {\n"
    "    h = relu(matmul(x, w1))\n    y = matmul(h, w2)\n}\n"
)
BF16 = (
    "func f(x: bf16[2, 128], w: bf16[128, 16]) -> y: f32[2, 16] {\n    y = relu(matmul(x, w))\n}\n"
)
COL_MAJOR = (
    "func f(x: f32[3, 136] col_major, w: f32[136, 8] col_major, b: f32[8]) -> y: f32[3, 8] {\n"
    "    y = relu(add(matmul(x, w), b))\n}\n"
)


def test_a_reduction_by_max_is_combined_by_max(ctx: SynthesisContext) -> None:
    (action,) = splits(past_forced(program(ctx, ROW_MAX).spec, ctx), ctx)
    graph = ctx.ruleset.ops[action.stages[1].op]
    assert isinstance(graph, GraphOp)
    second = ctx.ruleset.ops[graph.statements[1].op]
    assert second.expr == Func("max", tuple(Access(a.tensor, a.indices) for a in second.inputs))


@pytest.mark.runs_code
@pytest.mark.parametrize(
    "text",
    [dense(8, 192, 16), dense(8, 256, 16), ROW_MAX, ROW_SUM, MLP, BF16, COL_MAJOR],
    ids=["uneven", "halves", "max", "sum", "mlp", "bf16", "col_major"],
)
def test_split_fuse_compiles_and_matches_numpy(
    ctx: SynthesisContext, tmp_path: Path, text: str
) -> None:
    prog = program(ctx, text)
    spec = past_forced(prog.spec, ctx)
    (action,) = splits(spec, ctx)  # k = 192: 128 + 64, an uneven split
    memo: dict = {}
    children = tuple(synthesize(child, ctx, memo)[0] for child in action.children)
    cost = action.cost(spec, [c.cost for c in children], ctx)
    peaks = action.peaks(spec, [c.peaks for c in children], ctx)
    impl = under_forced(prog.spec, ctx, lambda _: Impl(spec, action, children, cost, peaks))
    source = lower_to_c("f", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)  # raises if wrong
