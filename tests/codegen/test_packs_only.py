"""A cache that holds only packed copies (``MemoryLevel.packs_only``).

zen1 with such an L2 behind a small L1 (a plugin in this module): a move into the L2 is
always a copy into a new buffer and only of a tile the L1 cannot hold, the DP still equals
enumeration, and a program that reads a strip of B from an L2 buffer computes the right
answer.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from zen1_l2 import Zen1L2

from morello import hookimpl
from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import MoveAction
from morello.plugins import Plugins
from morello.search import spec_actions
from morello.search.exhaustive import exhaustive_search, impl_problems
from morello.search.solve import synthesize
from morello.spec import Spec, memory_units
from morello.target import MemoryLevel, Target

L1_BYTES = 512  # 8 lines
L2_BYTES = 4096  # 64 lines


class _Zen1PackedL2(Zen1L2):
    """zen1 with an L1 of ``L1_BYTES`` and an L2 of ``L2_BYTES`` that only packs (a plugin)."""

    name = "zen1_packed_l2"

    @hookimpl
    def morello_targets(self) -> list[Target]:
        from morello_targets.zen1 import ZEN1

        l2 = MemoryLevel(
            name="L2",
            capacity=L2_BYTES,
            addressed=False,
            packs=("row_major",),
            packs_only=True,
            moves_to=("L1",),
        )
        gl, *rest = ZEN1.levels
        gl = attrs.evolve(gl, moves_to=("L2", *gl.moves_to))
        rest = [attrs.evolve(lv, capacity=L1_BYTES) if lv.name == "L1" else lv for lv in rest]
        return [attrs.evolve(ZEN1, name=self.name, levels=(gl, l2, *rest))]


@pytest.fixture(scope="module")
def l2ctx() -> SynthesisContext:
    return make_context("zen1_packed_l2", Plugins(modules=[_Zen1PackedL2()]), [], None)


def _matmul(ctx: SynthesisContext, m: int, k: int, n: int) -> Spec:
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    return build_program(func, ctx).spec


def _l2_moves(spec: Spec, ctx: SynthesisContext) -> list[MoveAction]:
    return [
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, MoveAction) and a.dest.level.name == "L2"
    ]


@pytest.mark.parametrize(
    "kwargs",
    [{"packs": ("row_major",)}, {"addressed": False}],
    ids=["addressed", "packs-nothing"],
)
def test_only_a_cache_that_packs_holds_only_packed_copies(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="holds only packed copies"):
        Target(
            name="t",
            description="",
            levels=(MemoryLevel(name="X", capacity=1024, packs_only=True, **kwargs),),
        )


def test_a_tile_too_big_for_the_l1_is_packed_into_the_l2(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 2, 32, 16)  # B: 32 rows of 64 bytes, 32 lines > 8
    moves = _l2_moves(spec, l2ctx)
    assert moves, "B (and A) are offered a buffer in the L2"
    l1 = l2ctx.target.level("L1")
    for move in moves:
        assert move.new_buffer and move.prologue is not None  # a copy, never a view
        assert move.epilogue is None  # nor of the output
        assert memory_units(move.dest, l1) > l1.limit_units
    assert {m.operand for m in moves} <= {0, 1}


def test_a_tile_the_l1_can_hold_is_not_moved_into_the_l2(l2ctx: SynthesisContext) -> None:
    spec = _matmul(l2ctx, 2, 4, 16)  # A 2 lines, B 4 lines: both fit the L1
    assert _l2_moves(spec, l2ctx) == []
    assert any(
        isinstance(a, MoveAction) and a.dest.level.name == "L1" for a in spec_actions(spec, l2ctx)
    )


def test_a_level_that_also_caches_offers_views_too(l2ctx: SynthesisContext) -> None:
    # The same L2 without packs_only: views in place as well, and copies of tiles that fit L1.
    class Both(_Zen1PackedL2):
        @hookimpl
        def morello_targets(self) -> list[Target]:
            (target,) = super().morello_targets()
            levels = tuple(
                attrs.evolve(lv, packs_only=False) if lv.name == "L2" else lv
                for lv in target.levels
            )
            return [attrs.evolve(target, levels=levels)]

    ctx = make_context("zen1_packed_l2", Plugins(modules=[Both()]), [], None)
    moves = _l2_moves(_matmul(ctx, 2, 4, 16), ctx)
    assert any(not m.new_buffer for m in moves)


class _Tiny(_Zen1PackedL2):
    """An L1 of 2 lines and an L2 of 8: small enough products for the oracle pack."""

    @hookimpl
    def morello_targets(self) -> list[Target]:
        (target,) = super().morello_targets()
        sizes = {"L1": 128, "L2": 512}
        levels = tuple(
            attrs.evolve(lv, capacity=sizes[lv.name]) if lv.name in sizes else lv
            for lv in target.levels
        )
        return [attrs.evolve(target, levels=levels)]


@pytest.mark.parametrize("shape", [(1, 8, 8), (2, 8, 8)])
def test_dp_equals_enumeration_with_a_packing_l2(shape: tuple[int, int, int]) -> None:
    ctx = make_context("zen1_packed_l2", Plugins(modules=[_Tiny()]), [], None)
    spec = _matmul(ctx, *shape)  # B: 4 lines, more than the L1 holds
    assert _l2_moves(spec, ctx)
    impl, _ = synthesize(spec, ctx, {})
    oracle = exhaustive_search(spec, ctx, max_trees=30_000)
    assert oracle.cost == impl.cost


def _forced(spec: Spec, action: MoveAction, ctx: SynthesisContext) -> Impl:
    """``spec`` implemented by ``action``, its children by the search."""
    memo: dict = {}
    children = tuple(synthesize(child, ctx, memo)[0] for child in action.children)
    cost = action.cost(spec, [c.cost for c in children], ctx)
    peaks = action.peaks(spec, [c.peaks for c in children], ctx)
    return Impl(spec, action, children, cost, peaks)


@pytest.mark.runs_code
def test_a_program_reading_b_from_an_l2_buffer_matches_numpy(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    if ctx.target.name != "zen1":
        pytest.skip("zen1 with a packing L2: runs under the zen1 factor")
    l2ctx = make_context("zen1_packed_l2", Plugins(modules=[_Zen1PackedL2()]), [], None)
    text = "func f(a: f32[6, 24], b: f32[24, 40]) -> c: f32[6, 40] {\n    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    program = build_program(func, l2ctx)
    (move,) = [m for m in _l2_moves(program.spec, l2ctx) if m.operand == 1]
    impl = _forced(program.spec, move, l2ctx)
    assert impl_problems(impl, l2ctx) == []
    source = lower_to_c("packs_only", [(program, impl)], l2ctx)
    lib = compile_shared(source.c_text, l2ctx.target, tmp_path / "packs_only", "packs_only")
    harness.check(lib, program, l2ctx, seed=3)  # raises CheckFailed on a mismatch
