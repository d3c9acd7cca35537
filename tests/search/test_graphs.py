"""Functions of several statements are one graph Spec: built, tiled (fused), pipelined.

Graphs here use the ops every target has (products): a chain ``y = (x w) v``, the same
written as a nested call, and a chain of three. They are checked piece by piece (the graph
op's index variables, which of them tiling may follow, its NumPy reference, the actions the
rules offer), against exhaustive enumeration on tiny shapes, and end to end: synthesized,
compiled and compared with NumPy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from morello.cli import main
from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.nodes import BlockAction, LoopAction
from morello.rules.graph import GraphOp, is_graph
from morello.search.exhaustive import exhaustive_search
from morello.search.expand import past_forced, spec_actions
from morello.search.solve import synthesize


def chain(m: int, k: int, j: int, n: int, nested: bool = False) -> str:
    head = f"func chain(x: f32[{m}, {k}], w: f32[{k}, {j}], v: f32[{j}, {n}]) -> y: f32[{m}, {n}]"
    if nested:
        return head + " {\n    y = matmul(matmul(x, w), v)\n}\n"
    return head + " {\n    h = matmul(x, w)\n    y = matmul(h, v)\n}\n"


def chain3(m: int, k: int) -> str:
    return (
        f"func chain3(a: f32[{m}, {k}], b: f32[{k}, {k}], c: f32[{k}, {k}], d: f32[{k}, {k}])"
        f" -> y: f32[{m}, {k}] {{\n"
        "    p = matmul(a, b)\n    q = matmul(p, c)\n    y = matmul(q, d)\n}\n"
    )


def program(ctx: SynthesisContext, text: str) -> Program:
    (func,) = parse_spec_file("<graph>", text).funcs
    return build_program(func, ctx)


def test_graph_op_is_named_by_its_structure(ctx: SynthesisContext) -> None:
    flat = program(ctx, chain(2, 3, 4, 5))
    nested = program(ctx, chain(2, 3, 4, 5, nested=True))
    assert flat.spec.op == nested.spec.op == "graph:t0=matmul(i0,i1);o=matmul(t0,i2)"
    assert flat.spec == nested.spec
    assert flat.operand_params == ("x", "w", "v", "y")
    assert [t.shape for t in flat.spec.operands] == [(2, 3), (3, 4), (4, 5), (2, 5)]


def test_graph_variables_and_which_tiling_may_follow(ctx: SynthesisContext) -> None:
    graph = ctx.ruleset.ops[program(ctx, chain(2, 3, 4, 5)).spec.op]
    assert isinstance(graph, GraphOp)
    assert [a.indices for a in graph.operands] == [
        ("v0", "v2"), ("v2", "v3"), ("v3", "v1"), ("v0", "v1")
    ]  # fmt: skip
    # Rows and columns of y tile; the inner index of the second product is a reduction.
    assert graph.tileable_vars == ("v0", "v1")
    assert graph.reduction_vars == ()
    sizes = graph.sizes([(2, 3), (3, 4), (4, 5), (2, 5)])
    assert sizes == {"v0": 2, "v2": 3, "v3": 4, "v1": 5}
    assert graph.tensor_shape("t0", sizes) == (2, 4)
    assert graph.flops(sizes) == 2 * 2 * 3 * 4 + 2 * 2 * 4 * 5
    rng = np.random.default_rng(1)
    x, w, v = (rng.standard_normal(s) for s in [(2, 3), (3, 4), (4, 5)])
    np.testing.assert_allclose(graph.reference([x, w, v], np.zeros((2, 5))), x @ w @ v)


def test_graph_with_a_tensor_read_twice_does_not_tile_along_it(ctx: SynthesisContext) -> None:
    text = (
        "func sq(a: f32[4, 4]) -> y: f32[4, 4] {\n    h = matmul(a, a)\n    y = matmul(h, a)\n}\n"
    )
    graph = ctx.ruleset.ops[program(ctx, text).spec.op]
    assert isinstance(graph, GraphOp)
    assert graph.tileable_vars == ()


def test_rules_offer_pipelines_and_fused_tiles(ctx: SynthesisContext) -> None:
    # h: f32[2, 8], in memory or registers (past a residency in an L2, if the target has one)
    spec = past_forced(program(ctx, chain(2, 8, 8, 8)).spec, ctx)
    actions = spec_actions(spec, ctx)
    pipes = [a for a in actions if isinstance(a, BlockAction) and a.rule == "pipeline"]
    assert {ts.level.name for p in pipes for _, ts in p.temporaries} == {
        lv.name for lv in ctx.target.levels if lv.addressed
    }
    first, rest = pipes[0].stages
    assert first.op == "matmul" and rest.op == "matmul"
    assert first.output == rest.operands[0] == pipes[0].temporaries[0][1]
    # Tiling the graph tiles every statement at once: the body is the same graph, smaller.
    loops = [a for a in actions if isinstance(a, LoopAction) and a.rule == "tile_out"]
    assert {a.var for a in loops} == {"v0", "v1"}
    body = next(a.body for a in loops if a.var == "v0")
    assert body.op == spec.op and body.operands[0].shape[0] < 2


def test_a_graph_is_not_tiled_along_a_row_a_statement_reads_whole(
    ctx: SynthesisContext,
) -> None:
    text = "func g(a: f32[2, 19]) -> y: f32[2, 19] {\n    y = softmax(add(a, a))\n}\n"
    graph = ctx.ruleset.ops[program(ctx, text).spec.op]
    assert isinstance(graph, GraphOp)
    assert graph.tileable_vars == (graph.output.indices[0],)


def test_three_statements_pipeline_into_a_graph_of_two(ctx: SynthesisContext) -> None:
    spec = past_forced(program(ctx, chain3(4, 8)).spec, ctx)
    pipe = next(
        a for a in spec_actions(spec, ctx) if isinstance(a, BlockAction) and a.rule == "pipeline"
    )
    assert pipe.stages[0].op == "matmul"
    assert pipe.stages[1].op == "graph:t0=matmul(i0,i1);o=matmul(t0,i2)"


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 2, 1, 1), (2, 1, 1, 2)])
def test_dp_equals_exhaustive_on_tiny_graphs(
    ctx: SynthesisContext, shape: tuple[int, int, int, int]
) -> None:
    spec = program(ctx, chain(*shape)).spec
    result = exhaustive_search(spec, ctx, max_trees=30_000)
    impl, _ = synthesize(spec, ctx, {})
    assert result.cost == impl.cost


def test_dp_equals_exhaustive_on_a_tiny_graph_of_three(ctx: SynthesisContext) -> None:
    spec = program(ctx, chain3(1, 1)).spec
    result = exhaustive_search(spec, ctx, max_trees=30_000)
    impl, _ = synthesize(spec, ctx, {})
    assert result.cost == impl.cost


TINY_GRAPHS_OF_OTHER_OPS = {
    "relu-of-add-row": "func f(x: f32[1, 2], b: f32[2]) -> y: f32[1, 2] {\n"
    "    y = relu(add(x, b))\n}\n",
    "dense-relu": "func f(x: f32[1, 1], w: f32[1, 1], b: f32[1]) -> y: f32[1, 1] {\n"
    "    y = relu(add(matmul(x, w), b))\n}\n",
    "sum-of-exp": "func f(x: f32[1, 2]) -> y: f32[1] {\n    y = sum(exp(x))\n}\n",
    "vectors": "func f(x: f32[2], b: f32[2]) -> y: f32[2] {\n    y = relu(mul(x, b))\n}\n",
    "exp-of-sum": "func f(x: f32[1, 2]) -> y: f32[1] {\n    y = exp(sum(x))\n}\n",
    "vector-times-matrix": "func f(x: f32[1], w: f32[1, 2]) -> y: f32[2] {\n"
    "    y = relu(matmul(x, w))\n}\n",
    "matrix-times-vector": "func f(w: f32[2, 1], x: f32[1], b: f32[2]) -> y: f32[2] {\n"
    "    y = add(matmul(w, x), b)\n}\n",
    # Scalars (rank 0): a dot product, and a vector's maximum broadcast back along it.
    "relu-of-a-dot-product": "func f(x: f32[2], w: f32[2]) -> y: f32[] {\n"
    "    y = relu(matmul(x, w))\n}\n",
    "sub-of-max": "func f(x: f32[2]) -> y: f32[2] {\n    y = sub(x, max(x))\n}\n",
}


@pytest.mark.parametrize(
    "text", list(TINY_GRAPHS_OF_OTHER_OPS.values()), ids=list(TINY_GRAPHS_OF_OTHER_OPS)
)
def test_dp_equals_exhaustive_on_tiny_graphs_of_other_ops(ctx: SynthesisContext, text: str) -> None:
    spec = program(ctx, text).spec
    result = exhaustive_search(spec, ctx, max_trees=30_000)
    impl, _ = synthesize(spec, ctx, {})
    assert result.cost == impl.cost


@pytest.mark.runs_code
@pytest.mark.parametrize(
    "text",
    [chain(4, 8, 8, 8), chain(3, 5, 2, 8, nested=True), chain3(2, 8)],
    ids=["chain", "nested-odd", "three"],
)
def test_graphs_compile_and_match_numpy(ctx: SynthesisContext, text: str, tmp_path: Path) -> None:
    prog = program(ctx, text)
    impl, _ = synthesize(prog.spec, ctx, {})
    assert is_graph(impl.spec.op)
    source = lower_to_c("graph", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)  # raises if wrong


def test_graph_answers_come_back_from_the_memo_table_file(
    target_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "chain.lark"
    spec.write_text(chain(2, 4, 4, 8, nested=True), encoding="utf-8")
    db = tmp_path / "memo.sqlite3"
    runs = []
    for out in ("first", "second"):
        argv = ["--target", target_name, str(spec), "--db", str(db), "--stats", "--json"]
        assert main([*argv, "-o", str(tmp_path / out)]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0]["specs_visited"] > 0 and runs[1]["specs_visited"] == 0
    assert runs[0]["cost"] == runs[1]["cost"]
    assert (tmp_path / "first.c").read_text() == (tmp_path / "second.c").read_text()
