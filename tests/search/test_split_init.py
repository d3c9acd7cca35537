"""``split_init``: a reduction loop whose first step initializes the output.

The loop replaces a fill of the output with the reduction's identity (``to_accum``) followed
by a ``split``: its first step is the Spec's own, non-accumulating form over one slice of the
reduction, and the later steps (and a tail) accumulate. Checked here: what the schema offers
and refuses, its cost rule, the memo table's round trip of its decision, the DP against the
exhaustive oracle on tiny Specs when it is offered at every step, its C against NumPy (loops,
repeated steps, tails; sums and maxima as well as products), and its choice for 1024^3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.db.table import decision_of
from morello.errors import RuleError
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.nodes import InitLoopAction, LoopAction
from morello.search.exhaustive import exhaustive_search
from morello.search.expand import action_for, past_forced, spec_actions, under_forced
from morello.search.solve import synthesize
from morello.spec import Spec

#: split_init at every power-of-two step, so that tiny Specs have it too.
EVERY_STEP = "rewrite split_init for * sizes pow2 into memory\n"


def _program(text: str, ctx: SynthesisContext) -> Program:
    (func,) = parse_spec_file("t.lark", text).funcs
    return build_program(func, ctx)


def _matmul(m: int, k: int, n: int) -> str:
    return f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{ c = matmul(a, b) }}"


def _spec(text: str, ctx: SynthesisContext) -> Spec:
    """The function's Spec, past a residency in an L2 where the target has one and the Spec
    fits there (the output resident in such a cache still counts as memory for ``into``)."""
    return past_forced(_program(text, ctx).spec, ctx)


def _inits(spec: Spec, ctx: SynthesisContext) -> list[InitLoopAction]:
    return [a for a in spec_actions(spec, ctx) if isinstance(a, InitLoopAction)]


def test_offered_for_a_non_accumulating_spec_in_memory(ctx: SynthesisContext) -> None:
    spec = _spec(_matmul(4, 200, 8), ctx)
    inits = _inits(spec, ctx)
    # Steps from 64 (core.rules' pow2_from64) that leave two trips or more: 64 only.
    assert [(a.var, a.step, a.trips) for a in inits] == [("k", 64, 3)]
    (loop,) = inits
    assert not loop.first.accum and loop.body.accum
    assert loop.tail is not None and loop.tail.accum
    assert loop.first.operands == loop.body.operands
    assert [t.shape for t in loop.body.operands] == [(4, 64), (64, 8), (4, 8)]
    assert [t.shape for t in loop.tail.operands] == [(4, 8), (8, 8), (4, 8)]
    assert loop.children == (loop.first, loop.body, loop.tail)


def test_not_offered_for_accumulating_specs_or_outputs_in_caches(ctx: SynthesisContext) -> None:
    spec = _spec(_matmul(4, 256, 8), ctx)
    assert _inits(spec, ctx)
    accumulating = Spec(spec.op, spec.operands, True, spec.limits, spec.serial)
    assert not _inits(accumulating, ctx)
    # The output moved into L1 (a cache, not addressed memory): core.rules says `into memory`.
    in_cache = [
        a.children[0]
        for a in spec_actions(spec, ctx)
        if a.describe().startswith("move: operand 2 -> ") and "@L1" in a.describe()
    ]
    assert in_cache
    assert not any(_inits(child, ctx) for child in in_cache)


def test_cost_is_the_first_step_then_the_loop_of_the_body(ctx: SynthesisContext) -> None:
    spec = _spec(_matmul(4, 256, 8), ctx)
    (loop,) = [a for a in _inits(spec, ctx) if a.step == 64]
    plain = LoopAction("split", "k", 64, 4, loop.body, None)
    first, body = 1000, 300
    assert loop.cost(spec, [first, body], ctx) == plain.cost(spec, [body], ctx) - body + first


def test_decision_round_trips_through_the_memo_table(ctx: SynthesisContext) -> None:
    spec = _spec(_matmul(4, 200, 8), ctx)
    for action in _inits(spec, ctx):
        assert decision_of(action)[0] == "init_loop"
        assert action_for(spec, decision_of(action), ctx) == action


def test_a_rule_may_not_split_an_op_without_an_accumulating_form(tmp_path: Path) -> None:
    rules = tmp_path / "bad.rules"
    rules.write_text("rewrite split_init for softmax sizes pow2\n", encoding="utf-8")
    with pytest.raises(RuleError, match="no accumulating form"):
        make_context("zen1", extra_rules=[rules])


@pytest.fixture(scope="module")
def every_step(tmp_path_factory: pytest.TempPathFactory, target_name: str) -> SynthesisContext:
    rules = tmp_path_factory.mktemp("rules") / "split_init.rules"
    rules.write_text(EVERY_STEP, encoding="utf-8")
    return make_context(target_name, extra_rules=[rules])


@pytest.mark.parametrize(("m", "k", "n"), [(1, 2, 1), (1, 4, 1), (2, 2, 2), (1, 3, 2), (2, 4, 1)])
def test_dp_equals_the_oracle_with_split_init(
    every_step: SynthesisContext, m: int, k: int, n: int
) -> None:
    ctx = every_step
    spec = _spec(_matmul(m, k, n), ctx)
    assert _inits(spec, ctx), "the tiny Spec must be offered split_init"
    best = exhaustive_search(spec, ctx, max_trees=30_000)
    impl, _ = synthesize(spec, ctx, {})
    assert impl.cost == best.cost


def _forced(spec: Spec, ctx: SynthesisContext, step: int) -> Impl:
    """``spec`` implemented by its split_init loop of ``step`` (below a residency, if any),
    the children by the DP."""
    return under_forced(spec, ctx, lambda below: _forced_at(below, ctx, step))


def _forced_at(spec: Spec, ctx: SynthesisContext, step: int) -> Impl:
    (loop,) = [a for a in _inits(spec, ctx) if a.step == step]
    memo: dict[Spec, object] = {}
    children = tuple(synthesize(child, ctx, memo)[0] for child in loop.children)
    cost = loop.cost(spec, [c.cost for c in children], ctx)
    peaks = loop.peaks(spec, [c.peaks for c in children], ctx)
    return Impl(spec, loop, children, cost, peaks)


CASES = {
    # a loop over later trips, and a tail
    "matmul-loop-tail": (_matmul(3, 200, 16), 64),
    # two trips: the second step is written out, no loop
    "matmul-two-trips": (_matmul(2, 128, 8), 64),
    "sum-rows": ("func f(x: f32[3, 300]) -> y: f32[3] { y = sum(x) }", 64),
    "max-rows": ("func f(x: f32[2, 256]) -> y: f32[2] { y = max(x) }", 64),
}


@pytest.mark.runs_code
@pytest.mark.parametrize("case", sorted(CASES))
def test_c_of_a_forced_split_init_matches_numpy(
    ctx: SynthesisContext, case: str, tmp_path: Path
) -> None:
    text, step = CASES[case]
    prog = _program(text, ctx)
    impl = _forced(prog.spec, ctx, step)
    source = lower_to_c("f", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)  # raises if wrong


@pytest.mark.target("zen1")
def test_chosen_for_1024_cubed_without_a_fill_pass() -> None:
    ctx = make_context("zen1")
    spec = _program(_matmul(1024, 1024, 1024), ctx).spec
    # Below the n strips of 24 (the DP's choice), the strip's Spec.
    strip = next(
        a.body
        for a in spec_actions(spec, ctx)
        if isinstance(a, LoopAction) and (a.var, a.step) == ("n", 24)
    )
    impl, _ = synthesize(strip, ctx, {})
    assert isinstance(impl.action, InitLoopAction)
    assert (impl.action.var, impl.action.step) == ("k", 256)
    assert not any(n.spec.op == "zero" for n in impl.walk() if n.spec.output.level.name == "GL")
