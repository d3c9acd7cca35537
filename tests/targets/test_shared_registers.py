"""Register levels that share one register file (``MemoryLevel.shares``).

On x86 an f32 scalar lives in the low lane of a vector register, so a target may declare
its RF and VRF one file of 16: a move into either then takes registers from both, and no
program keeps more values in registers than the file holds. A scalar small enough to fold
into the instruction that reads it (``MemoryLevel.folds``) takes only its own level's.
"""

from __future__ import annotations

import attrs
import pytest

from morello import CostCoefficients, hookimpl
from morello.context import SynthesisContext, make_context
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes.move import MoveAction
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.spec import memory_units, subtract_limits
from morello.target import MemoryLevel, Target


def _target(folds: int = 0, **shares: tuple[str, ...]) -> Target:
    return Target(
        name="t",
        description="",
        levels=(
            MemoryLevel(name="GL", capacity=1 << 20, moves_to=("VRF", "RF")),
            MemoryLevel(
                name="VRF", capacity=16, unit="registers", vector_bytes=(32,),
                shares=shares.get("VRF", ()),
            ),
            MemoryLevel(
                name="RF", capacity=16, unit="registers", shares=shares.get("RF", ()),
                folds=folds,
            ),
        ),
    )  # fmt: skip


def test_a_move_into_a_shared_level_lowers_both() -> None:
    t = _target(VRF=("RF",), RF=("VRF",))
    assert t.sharing(1, 4) == (1, 2)
    assert t.sharing(2, 4) == (2, 1)
    assert subtract_limits(t, (100, 16, 16), 2, 4) == (100, 8, 8)
    assert subtract_limits(t, (100, 16, 2), 1, 4) is None  # RF has 2 left
    apart = _target()
    assert apart.sharing(1, 4) == (1,)
    assert subtract_limits(apart, (100, 16, 16), 2, 4) == (100, 16, 8)


def test_a_move_small_enough_to_fold_lowers_only_its_own_level() -> None:
    t = _target(folds=1, VRF=("RF",), RF=("VRF",))
    assert t.sharing(2, 1) == (2,)  # one scalar: folded into the broadcast that reads it
    assert t.sharing(2, 2) == (2, 1)  # two are held across their uses
    assert t.sharing(1, 1) == (1, 2)  # folds is RF's: a vector still takes from both
    assert subtract_limits(t, (100, 0, 16), 2, 1) == (100, 0, 8)
    assert subtract_limits(t, (100, 0, 16), 2, 2) is None


def test_levels_sharing_a_file_have_one_size() -> None:
    # Otherwise the smaller level's limit would cap moves into the larger (a move into
    # either lowers both), as spr's 16 scalar and 32 vector registers would.
    with pytest.raises(ValueError, match=r"capacities differ \(16 and 8\): one file has one size"):
        Target(
            name="t",
            description="",
            levels=(
                MemoryLevel(name="GL", capacity=1 << 20, moves_to=("VRF", "RF")),
                MemoryLevel(name="VRF", capacity=16, unit="registers", shares=("RF",)),
                MemoryLevel(name="RF", capacity=8, unit="registers"),
            ),
        )


def test_negative_folds_is_refused() -> None:
    with pytest.raises(ValueError, match="level RF: folds must not be negative, got -1"):
        _target(folds=-1)


@pytest.mark.parametrize(
    ("shares", "message"),
    [
        ({"VRF": ("XMM",)}, "level VRF shares registers with unknown level 'XMM'"),
        ({"VRF": ("VRF",)}, "level VRF shares registers with unknown level 'VRF'"),
        ({"VRF": ("GL",)}, "level VRF shares with GL: only register levels share"),
    ],
)
def test_bad_sharing_is_refused(shares: dict[str, tuple[str, ...]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _target(**shares)


def _most_registers(impl: Impl, ctx: SynthesisContext, files: set[int]) -> int:
    """The most registers of one file that moves on one path from the root hold at once
    (a value small enough to fold into the instruction that reads it holds none)."""
    worst = 0
    action = impl.action
    here = 0
    if isinstance(action, MoveAction):
        idx = ctx.target.level_index(action.dest.level)
        if idx in files:
            lv = ctx.target.levels[idx]
            units = memory_units(action.dest, lv)
            here = 0 if units <= lv.folds else units
    for child in impl.children:
        worst = max(worst, _most_registers(child, ctx, files))
    return here + worst


class _ApartZen1:
    """zen1 with its scalar registers a file apart from the vector ones (a plugin)."""

    @hookimpl
    def morello_targets(self) -> list[Target]:
        from morello_targets.zen1 import ZEN1

        levels = tuple(
            attrs.evolve(lv, shares=(), folds=0) if lv.name in ("VRF", "RF") else lv
            for lv in ZEN1.levels
        )
        return [attrs.evolve(ZEN1, name="zen1_apart", levels=levels)]

    @hookimpl
    def morello_cost_coefficients(self, target: Target) -> CostCoefficients | None:
        from morello_targets.zen1 import ZEN1, morello_cost_coefficients

        return morello_cost_coefficients(ZEN1) if target.name == "zen1_apart" else None


def _matmul_impl(ctx: SynthesisContext, m: int, k: int, n: int) -> Impl:
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    impl, _ = synthesize(build_program(func, ctx).spec, ctx, {})
    return impl


def test_zen1_programs_fit_its_shared_register_file() -> None:
    """With RF a file apart, the 4x1024x1024 product holds a block of A in scalar registers
    beside the vector accumulators (more than 16 values; in the 8x512x512 product such a
    block made gcc spill the broadcasts to the stack, BENCHMARKS.md); zen1 shares the file,
    and no path holds more than 16. (8x512x512 itself now broadcasts A from L1 even with
    the files apart: an unrolled loop reads such an element once, ``LoopAction.loaded_once``.)"""

    def files(ctx: SynthesisContext) -> set[int]:
        return {ctx.target.level_index("VRF"), ctx.target.level_index("RF")}

    apart = make_context("zen1_apart", Plugins(modules=[_ApartZen1()]), [], None)
    assert _most_registers(_matmul_impl(apart, 4, 1024, 1024), apart, files(apart)) > 16
    ctx = make_context("zen1", Plugins(), [], None)
    for shape in [(8, 512, 512), (4, 1024, 1024)]:
        assert _most_registers(_matmul_impl(ctx, *shape), ctx, files(ctx)) <= 16
