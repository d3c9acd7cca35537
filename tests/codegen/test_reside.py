"""Residency in a cache the hardware fills by itself (``MemoryLevel.whole_specs``).

zen1 with a small L2 of that kind (the plugin of ``tests/zen1_l2.py``): a Spec whose
main-memory operands fit there together is resident (one forced ``reside`` action), nothing
is moved into the L2 one operand at a time, a loop of resident steps fills the operands it
does not move along once, the DP still equals enumeration, and the C it makes computes the
right answer.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from spec_library import compile_spec_text
from zen1_l2 import L2_BYTES
from zen1_l2 import Zen1L2 as _Zen1L2

from morello import CostCoefficients, hookimpl
from morello.codegen import harness
from morello.context import SynthesisContext, make_context
from morello.cost import access_cost, iteration_points
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import LoopAction, MoveAction, ParallelLoopAction, ResideAction
from morello.nodes.reside import loop_reuse, not_resident
from morello.plugins import Plugins
from morello.search import only_forced, past_forced, spec_actions, under_forced
from morello.search.exhaustive import exhaustive_search, impl_problems
from morello.search.solve import synthesize
from morello.spec import Spec
from morello.target import MemoryLevel, Target


@pytest.fixture(scope="module")
def l2ctx() -> SynthesisContext:
    return make_context("zen1_l2", Plugins(modules=[_Zen1L2()]), [], None)


def _matmul(ctx: SynthesisContext, m: int, k: int, n: int) -> Spec:
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    return build_program(func, ctx).spec


def test_a_whole_specs_level_must_be_a_plain_cache() -> None:
    with pytest.raises(ValueError, match="holds whole Specs but is addressed"):
        Target(
            name="t",
            description="",
            levels=(MemoryLevel(name="X", capacity=1024, whole_specs=True),),
        )


def test_a_spec_that_fits_has_only_the_forced_residency(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 4, 4, 8)  # 4 + 4 + 4 lines
    (action,) = spec_actions(spec, l2ctx)
    assert isinstance(action, ResideAction)
    assert action.operands == (0, 1, 2)
    assert all(t.level.name == "L2" for t in action.body.operands)
    l2 = l2ctx.target.level_index("L2")
    assert action.body.limits[l2] == 0
    # Resident, it is never resident again.
    body_actions = spec_actions(action.body, l2ctx)
    assert not any(isinstance(a, ResideAction) for a in body_actions)
    # The first touch of each line costs the difference of the two levels' prices.
    fill = sum(
        access_cost(src, l2ctx) - access_cost(dst, l2ctx)
        for src, dst in zip(spec.operands, action.body.operands, strict=True)
    )
    assert fill > 0
    assert action.cost(spec, [1000], l2ctx) == fill + 1000


def test_tools_step_past_the_forced_residency(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 4, 4, 8)
    (action,) = spec_actions(spec, l2ctx)
    assert only_forced(spec, l2ctx) == action
    assert past_forced(spec, l2ctx) == action.body
    assert only_forced(action.body, l2ctx) is None  # a choice there
    # A tree built below the residency, with the residency above it.
    below, _ = synthesize(action.body, l2ctx, {})
    built_at: list[Spec] = []
    tree = under_forced(spec, l2ctx, lambda at: built_at.append(at) or below)
    assert built_at == [action.body]
    assert tree.action == action and tree.children == (below,)
    assert tree.cost == action.cost(spec, [below.cost], l2ctx)
    assert tree.past_forced() is below
    assert tree == synthesize(spec, l2ctx, {})[0]


def test_a_spec_not_resident_is_offered_everything_but_residency(l2ctx: SynthesisContext) -> None:
    spec = not_resident(_matmul(l2ctx, 4, 4, 8), l2ctx)
    assert spec.limits[l2ctx.target.level_index("L2")] == 0
    actions = spec_actions(spec, l2ctx)
    assert len(actions) > 1 and not any(isinstance(a, ResideAction) for a in actions)
    impl, _ = synthesize(spec, l2ctx, {})
    assert not any(isinstance(n.action, ResideAction) for n in impl.walk())


def test_a_parallel_spec_may_still_run_in_parallel_below_its_residency(
    l2ctx: SynthesisContext,
) -> None:
    # What is resident is buffers in main memory, read by each thread through its own core.
    two = attrs.evolve(l2ctx, threads=2)
    spec = attrs.evolve(_matmul(two, 4, 4, 8), serial=False)
    (action,) = spec_actions(spec, two)
    assert isinstance(action, ResideAction) and not action.body.serial
    loops = [a for a in spec_actions(action.body, two) if isinstance(a, ParallelLoopAction)]
    assert loops and all(a.body.serial for a in loops)


def test_a_spec_too_large_is_not_resident(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 16, 32, 32)  # 32 + 64 + 32 lines > 64
    actions = spec_actions(spec, l2ctx)
    assert actions and not any(isinstance(a, ResideAction) for a in actions)
    for a in actions:  # nothing is moved into L2 one operand at a time
        assert not (isinstance(a, MoveAction) and a.dest.level.name == "L2")
    impl, _ = synthesize(spec, l2ctx, {})
    resident = [n for n in impl.walk() if isinstance(n.action, ResideAction)]
    assert resident, "a tile of it fits the L2"
    for node in resident:  # below a residency, only what its Spec reads once is in memory
        left = [i for i, t in enumerate(node.action.body.operands) if t.level.name == "GL"]
        assert all(node.spec.operands[i].volume == iteration_points(node.spec, l2ctx) for i in left)
        assert not set(left) & set(node.action.operands)
    assert impl_problems(impl, l2ctx) == []


def test_an_operand_read_once_stays_in_memory(l2ctx: SynthesisContext) -> None:
    # 1x4x16: b's 64 elements are each used once (by one point of 64), a 16 times, c 4.
    spec = _matmul(l2ctx, 1, 4, 16)  # 1 + 4 + 1 lines: fits
    (action,) = spec_actions(spec, l2ctx)
    assert isinstance(action, ResideAction)
    assert action.operands == (0, 2)
    assert [t.level.name for t in action.body.operands] == ["L2", "GL", "L2"]
    # Its reads are priced where it is, as a stream or walk there: the fill is the others'.
    assert action.cost(spec, [0], l2ctx) == _fill(spec, 0, l2ctx) + _fill(spec, 2, l2ctx)
    # A Spec that reuses nothing (an elementwise op) is not resident at all.
    text = "func r(x: f32[4, 16]) -> y: f32[4, 16] {\n    y = relu(x)\n}\n"
    (func,) = parse_spec_file("r.lark", text).funcs
    relu = build_program(func, l2ctx).spec
    assert not any(isinstance(a, ResideAction) for a in spec_actions(relu, l2ctx))
    # A matvec's weights are never moved into the L2, at any tile of it.
    (action,) = spec_actions(_matmul(l2ctx, 1, 8, 64), l2ctx)  # 1 + 32 + 4 lines
    assert isinstance(action, ResideAction) and action.operands == (0, 2)
    impl, _ = synthesize(_matmul(l2ctx, 1, 32, 64), l2ctx, {})
    resident = [n for n in impl.walk() if isinstance(n.action, ResideAction)]
    assert all(1 not in n.action.operands for n in resident)


def test_a_loop_credits_nothing_for_an_operand_its_steps_read_once(
    l2ctx: SynthesisContext,
) -> None:
    # 16x16x32 (16 + 32 + 32 lines) does not fit; a step of one row (1 + 32 + 2) does, and
    # reads each element of b once, so b stays in memory in the step, priced there piece by
    # piece. The loop over m does not move along b, but credits nothing for it: the whole
    # tile's fill could be more than the step paid for b (see ``resident_operands``).
    spec = _matmul(l2ctx, 16, 16, 32)
    assert not any(isinstance(a, ResideAction) for a in spec_actions(spec, l2ctx))
    loop = _loop(spec, l2ctx, "m", 1)
    (reside,) = spec_actions(loop.body, l2ctx)
    assert isinstance(reside, ResideAction) and reside.operands == (0, 2)
    assert loop_reuse(spec, loop.body, "m", 15, l2ctx) == 0
    # Steps of two rows reuse b (each element for two points): moved, and credited.
    two = _loop(spec, l2ctx, "m", 2)
    assert loop_reuse(spec, two.body, "m", 7, l2ctx) == 7 * _fill(two.body, 1, l2ctx) > 0


def _loop(spec: Spec, ctx: SynthesisContext, var: str, step: int) -> LoopAction:
    (loop,) = [
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, LoopAction) and (a.var, a.step) == (var, step)
    ]
    return loop


def _fill(spec: Spec, i: int, ctx: SynthesisContext) -> int:
    resident = attrs.evolve(spec.operands[i], level=ctx.target.level("L2"))
    return access_cost(spec.operands[i], ctx) - access_cost(resident, ctx)


def test_a_loop_of_resident_steps_fills_what_it_does_not_move_along_once(
    l2ctx: SynthesisContext,
) -> None:
    spec = _matmul(l2ctx, 32, 16, 16)  # 32 + 16 + 32 lines > 64: not resident
    assert not any(isinstance(a, ResideAction) for a in spec_actions(spec, l2ctx))
    loop = _loop(spec, l2ctx, "m", 8)  # steps of 8 + 16 + 8 lines: each step is resident
    assert isinstance(spec_actions(loop.body, l2ctx)[0], ResideAction)
    # Along m, A and C move and B (operand 1) does not: trips 2..4 find B in the L2.
    saved = 3 * _fill(loop.body, 1, l2ctx)
    assert saved > 0
    assert loop_reuse(spec, loop.body, "m", 3, l2ctx) == saved
    plain = 4 * 1000 + loop._chain_cost(spec, l2ctx) + loop._stream_cost(spec, l2ctx)
    assert loop.cost(spec, [1000], l2ctx) == plain - saved


def test_a_reduction_loop_of_resident_steps_fills_its_output_once(
    l2ctx: SynthesisContext,
) -> None:
    spec = attrs.evolve(_matmul(l2ctx, 16, 64, 8), accum=True)  # 64 + 64 + 16 lines
    loop = _loop(spec, l2ctx, "k", 16)
    assert loop_reuse(spec, loop.body, "k", 3, l2ctx) == 3 * _fill(loop.body, 2, l2ctx)


def test_no_reuse_where_steps_are_not_resident(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 32, 64, 32)
    loop = _loop(spec, l2ctx, "m", 16)  # a step of 16 + 128 + 32 lines does not fit
    assert not any(isinstance(a, ResideAction) for a in spec_actions(loop.body, l2ctx))
    assert loop_reuse(spec, loop.body, "m", loop.trips - 1, l2ctx) == 0
    # Inside a residency (no room left at L2) the loop's operands are already there.
    small = _matmul(l2ctx, 8, 8, 8)
    (reside,) = spec_actions(small, l2ctx)
    assert isinstance(reside, ResideAction)
    inner = _loop(reside.body, l2ctx, "m", 4)
    assert loop_reuse(reside.body, inner.body, "m", 1, l2ctx) == 0

    # And on a target without such a level, never.
    class NoL2(_Zen1L2):
        @hookimpl
        def morello_targets(self) -> list[Target]:
            (target,) = super().morello_targets()
            gl, _, *rest = target.levels
            return [attrs.evolve(target, levels=(attrs.evolve(gl, moves_to=("L1",)), *rest))]

    flat = make_context("zen1_l2", Plugins(modules=[NoL2()]), [], None)
    plain = _matmul(flat, 32, 16, 16)
    assert loop_reuse(plain, _loop(plain, flat, "m", 8).body, "m", 3, flat) == 0


class _Zen1L3(_Zen1L2):
    """zen1 with the L2 of ``_Zen1L2`` and, outside it, an L3 of 4 times its size that holds
    whole Specs too, a line there at 10."""

    @hookimpl
    def morello_targets(self) -> list[Target]:
        (target,) = super().morello_targets()
        gl, l2, *rest = target.levels
        l3 = attrs.evolve(l2, name="L3", capacity=4 * L2_BYTES, moves_to=("L1", "L2"))
        gl = attrs.evolve(gl, moves_to=(*gl.moves_to, "L3"))
        return [attrs.evolve(target, levels=(gl, l3, l2, *rest))]

    @hookimpl
    def morello_cost_coefficients(self, target: Target) -> CostCoefficients | None:
        base = super().morello_cost_coefficients(target)
        return base and attrs.evolve(base, level_hit={**base.level_hit, "L3": 10})


def test_a_step_that_fits_two_caches_is_credited_once() -> None:
    two = make_context("zen1_l2", Plugins(modules=[_Zen1L3()]), [], None)
    one = make_context("zen1_l2", Plugins(modules=[_Zen1L2()]), [], None)
    assert [lv.name for lv in two.target.levels][:3] == ["GL", "L3", "L2"]
    # 128 + 16 + 128 lines fit neither cache; steps of 4 rows (4 + 16 + 4) fit both. B,
    # which the loop does not move along, is credited at the L2's fill (the larger), not at
    # the L2's and the L3's together.
    spec, plain = _matmul(two, 128, 16, 16), _matmul(one, 128, 16, 16)
    body = _loop(spec, two, "m", 4).body
    credit = loop_reuse(spec, body, "m", 31, two)
    assert credit == loop_reuse(plain, _loop(plain, one, "m", 4).body, "m", 31, one) > 0
    assert credit == 31 * _fill(body, 1, two)
    # A step that fits the L3 only is credited at the L3's fill.
    wide = _matmul(two, 64, 32, 32)  # steps of 32 rows: 64 + 64 + 64 lines, over the L2
    step = _loop(wide, two, "m", 32).body
    l3 = attrs.evolve(step.operands[1], level=two.target.level("L3"))
    fill = access_cost(step.operands[1], two) - access_cost(l3, two)
    assert loop_reuse(wide, step, "m", 1, two) == fill > 0


@pytest.mark.parametrize("shape", [(1, 2, 8), (2, 2, 8), (2, 3, 4)])
def test_dp_equals_enumeration_with_residency(
    l2ctx: SynthesisContext, shape: tuple[int, int, int]
) -> None:
    spec = _matmul(l2ctx, *shape)
    impl, _ = synthesize(spec, l2ctx, {})
    assert isinstance(impl.action, ResideAction)
    oracle = exhaustive_search(spec, l2ctx, max_trees=30_000)
    assert oracle.cost == impl.cost


def test_dp_equals_enumeration_over_a_loop_of_resident_steps() -> None:
    # An L2 of 4 lines: a 4x4x8 product (1 + 2 + 2 lines) is not resident, its steps of 2
    # rows along m (1 + 2 + 1) are, each reusing B, and the loop credits B's later fills.
    class Tiny(_Zen1L2):
        @hookimpl
        def morello_targets(self) -> list[Target]:
            (target,) = super().morello_targets()
            levels = tuple(
                attrs.evolve(lv, capacity=256) if lv.name == "L2" else lv for lv in target.levels
            )
            return [attrs.evolve(target, levels=levels)]

    ctx = make_context("zen1_l2", Plugins(modules=[Tiny()]), [], None)
    spec = _matmul(ctx, 4, 4, 8)
    assert not any(isinstance(a, ResideAction) for a in spec_actions(spec, ctx))
    impl, _ = synthesize(spec, ctx, {})
    oracle = exhaustive_search(spec, ctx, max_trees=30_000)
    assert oracle.cost == impl.cost
    # The programs compared include loops that credit reuse (B, along m).
    assert loop_reuse(spec, _loop(spec, ctx, "m", 2).body, "m", 1, ctx) > 0


@pytest.mark.runs_code
def test_resident_programs_match_numpy(ctx: SynthesisContext, tmp_path: Path) -> None:
    if ctx.target.name != "zen1":
        pytest.skip("zen1 with an L2: runs under the zen1 factor")
    l2ctx = make_context("zen1_l2", Plugins(modules=[_Zen1L2()]), [], None)
    text = (
        "func small(a: f32[8, 8], b: f32[8, 8]) -> c: f32[8, 8] {\n    c = matmul(a, b)\n}\n"
        "func big(a: f32[24, 40], b: f32[40, 32] col_major) -> c: f32[24, 32] {\n"
        "    c = matmul(a, b)\n}\n"
    )
    built = compile_spec_text("reside", text, l2ctx, {}, tmp_path)
    for name, (lib, program, impl) in built.items():
        assert any(isinstance(n.action, ResideAction) for n in impl.walk()), name
        harness.check(lib, program, l2ctx, seed=5)  # raises CheckFailed on a mismatch
