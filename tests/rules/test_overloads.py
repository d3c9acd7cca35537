"""Ops declared more than once with other ranks (overloads), ops with reductions inside their
expression, and what rule files may now say: `in registers` decompositions, kernels that
loop over a dimension of any extent (`{n}` in a template, `/ 8` in a cost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.context import SynthesisContext, make_context
from morello.dtypes import dtype
from morello.errors import RuleError, SpecError
from morello.lang.rule_file import parse_rule_file
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.layout import row_major
from morello.nodes import MoveAction
from morello.rules.rewrites import DecomposeRule
from morello.rules.schemas import temp_buffers
from morello.search.expand import past_forced, spec_actions
from morello.spec import TensorSpec


def _program(ctx: SynthesisContext, text: str) -> Program:
    (func,) = parse_spec_file("<test>", text).funcs
    return build_program(func, ctx)


def test_a_call_picks_the_overload_its_argument_ranks_fit(ctx: SynthesisContext) -> None:
    both = "func f(h: f32[4, 8], b: f32{b}) -> y: f32[4, 8] {{\n    y = add(h, b)\n}}\n"
    assert _program(ctx, both.format(b="[4, 8]")).spec.op == "add"
    assert _program(ctx, both.format(b="[8]")).spec.op == "add/2.1.2"
    # zero() has no inputs: the result's rank picks the form.
    vec = "func f(x: f32[4, 8]) -> y: f32[4] {\n    y = zero()\n}\n"
    assert _program(ctx, vec).spec.op == "zero/1"
    # max of one matrix is the row maximum; of two, the elementwise maximum.
    row = "func f(x: f32[4, 8]) -> y: f32[4] {\n    y = max(x)\n}\n"
    assert _program(ctx, row).spec.op == "max/2.1"


def test_no_overload_for_the_ranks_is_a_located_error(ctx: SynthesisContext) -> None:
    text = "func f(h: f32[4], b: f32[4, 4]) -> y: f32[4, 4] {\n    y = add(h, b)\n}\n"
    with pytest.raises(SpecError) as info:
        _program(ctx, text)
    first = info.value.format().splitlines()[0]
    assert first.startswith("<test>:2:9: error: no form of add takes arguments of rank 1, 2")
    assert "add(a[i, j], b[j]) -> c[i, j]" in first


def test_broadcast_shapes_must_agree(ctx: SynthesisContext) -> None:
    text = "func f(h: f32[4, 8], b: f32[4]) -> y: f32[4, 8] {\n    y = add(h, b)\n}\n"
    with pytest.raises(SpecError, match="shape mismatch in add"):
        _program(ctx, text)


def test_kernels_and_decompositions_resolve_to_overload_keys(ctx: SynthesisContext) -> None:
    ops = ctx.ruleset.ops
    for k in ctx.ruleset.kernels:
        opdef = ops[k.op]
        ranks = [len(p.dims) for p in k.operands]
        assert ranks == [len(a.indices) for a in opdef.operands], k.name
    decomposed = {r.op for r in ctx.ruleset.rules if isinstance(r, DecomposeRule)}
    assert {"matmul", "sum", "max/2.1", "softmax"} <= decomposed


def test_a_decomposition_applies_to_every_overload_it_fits(tmp_path: Path) -> None:
    extra = tmp_path / "acc.rules"
    extra.write_text("rewrite add_acc: add(a, b) -> c => { c = zero(); c += add(a, b) }\n")
    ctx = make_context("zen1", extra_rules=[extra])
    rules = [r for r in ctx.ruleset.rules if getattr(r, "name", "") == "add_acc"]
    # Matrices, the broadcast row, vectors, scalars, and a scalar broadcast over a vector or
    # a matrix.
    want = ["add", "add/0.0.0", "add/1.0.1", "add/1.1.1", "add/2.0.2", "add/2.1.2"]
    assert sorted(r.op for r in rules) == want  # type: ignore[union-attr]


def test_one_kernel_declaration_with_two_patterns_gives_two_kernels() -> None:
    # `kernel vadd_f32x8, vadd1_f32x8:` in x86_avx2.rules: a row of 8 and a vector of 8.
    text = (
        "kernel k2, k1:\n"
        "    c: f32[1, 1] @registers = relu(a: f32[1, 1] @registers)\n"
        "  | c: f32[1] @registers = relu(a: f32[1] @registers)\n"
        "    cost scalar_op\n"
        '    c "{c} = {a} > 0.0f ? {a} : 0.0f;"\n'
    )
    k2, k1 = parse_rule_file("two.rules", text).kernels
    assert (k2.name, k1.name) == ("k2", "k1")
    assert [len(p.dims) for p in k2.operands] == [2, 2]
    assert [len(p.dims) for p in k1.operands] == [1, 1]
    assert k2.cost == k1.cost and k2.c_lines == k1.c_lines
    assert (k2.loc.line, k1.loc.line) == (1, 3)
    # zen1's x86_avx2.rules (whatever target the suite runs for): one overload each.
    built = {k.name: k.op for k in make_context("zen1").ruleset.kernels}
    assert (built["vadd_f32x8"], built["vadd1_f32x8"]) == ("add", "add/1.1.1")


def test_an_inner_reduction_keeps_its_row_whole(ctx: SynthesisContext) -> None:
    softmax = ctx.ruleset.ops["softmax"]
    assert softmax.tileable_vars == ("i",)  # j: the row sum reads the whole row
    assert softmax.combiner is None  # no accumulating form
    assert ctx.ruleset.ops["sum"].combiner == "sum"
    assert ctx.ruleset.ops["max/2.1"].combiner == "max"
    assert ctx.ruleset.ops["exp"].combiner == "sum"  # no reduction: `+=` adds


def test_splitting_softmax_is_a_located_error(tmp_path: Path) -> None:
    extra = tmp_path / "split.rules"
    extra.write_text("rewrite split for accum softmax sizes pow2\n")
    with pytest.raises(RuleError) as info:
        make_context("zen1", extra_rules=[extra])
    assert info.value.format().startswith(
        f"{extra}:1:1: error: rewrite split: softmax has no accumulating form"
    )


def test_in_registers_places_temporaries_in_registers_only(ctx: SynthesisContext) -> None:
    rule = next(
        r for r in ctx.ruleset.rules if isinstance(r, DecomposeRule) and r.name == "exp_shifted"
    )
    assert rule.registers_only
    ts = TensorSpec((1, 8), dtype("f32"), ctx.target.levels[0], row_major(2))
    everywhere = {t.level for _, t in temp_buffers(ts, ctx)}
    registers = {t.level for _, t in temp_buffers(ts, ctx, registers_only=True)}
    assert registers and registers < everywhere
    assert all(lv.counts_registers for lv in registers)


def test_in_registers_without_temporaries_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.rules"
    path.write_text("rewrite r: sum(a) -> c => { c = zero(); c += sum(a) } in registers\n")
    with pytest.raises(RuleError, match="`in registers` places temporaries, but it has none"):
        parse_rule_file(path)


def test_a_template_may_name_a_dim_and_a_cost_may_divide(tmp_path: Path) -> None:
    path = tmp_path / "loop.rules"
    path.write_text(
        "kernel rowsum:\n"
        "    c: f32[1] @RF += sum(a: f32[1, n] @L1)\n"
        "    cost n * scalar_op / 8 + 3\n"
        '    c "for (int j = 0; j < {n}; j++) {c} += (&{a})[j];"\n'
    )
    (kernel,) = parse_rule_file(path).kernels
    assert kernel.main_cost({"n": 20}, {"scalar_op": 1}) == 3 + 3  # ceil(20 / 8) + 3
    lines = kernel.render({"c": ("s", "&s"), "a": ("x[0]", "&x[0]")}, {"n": 20})
    assert lines == ["for (int j = 0; j < 20; j++) s += (&x[0])[j];"]


def test_a_dim_named_like_an_operand_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.rules"
    path.write_text(
        'kernel k:\n    c: f32[1] @RF += sum(a: f32[1, c] @L1)\n    cost 1\n    c "{c} += 1;"\n'
    )
    with pytest.raises(RuleError, match="'c' names both an operand and a dimension"):
        parse_rule_file(path)


def test_into_limits_the_kinds_of_level_a_move_brings_operands_into(tmp_path: Path) -> None:
    path = tmp_path / "into.rules"
    path.write_text("rewrite move for graph into cache\nrewrite move for matmul into memory\n")
    cache, memory = parse_rule_file(path).rules
    assert cache.into == ("cache",) and memory.into == ("memory",)  # type: ignore[union-attr]
    bad = tmp_path / "bad.rules"
    bad.write_text("rewrite move for graph into disk\n")
    with pytest.raises(RuleError, match="unknown kind of level 'disk'"):
        parse_rule_file(bad)
    bad.write_text("rewrite move for graph operands outputs\n")
    with pytest.raises(RuleError, match="unknown operand set 'outputs'"):
        parse_rule_file(bad)


def test_graph_moves_go_into_the_cache_only(ctx: SynthesisContext) -> None:
    text = (
        "func f(x: f32[4, 8], w: f32[8, 8], b: f32[8]) -> y: f32[4, 8] {\n"
        "    y = relu(add(matmul(x, w), b))\n}\n"
    )
    spec = past_forced(_program(ctx, text).spec, ctx)
    moves = [a for a in spec_actions(spec, ctx) if isinstance(a, MoveAction)]
    assert moves
    assert {m.dest.level.addressed for m in moves} == {False}
    assert {m.operand for m in moves} == {0, 1, 2}  # the inputs, not the output
