"""Register levels that share one register file (``MemoryLevel.shares``).

On x86 an f32 scalar lives in the low lane of a vector register, so a target may declare
its RF and VRF one file of 16: a move into either then takes registers from both, and no
program keeps more values in registers than the file holds.
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


def _target(**shares: tuple[str, ...]) -> Target:
    return Target(
        name="t",
        description="",
        levels=(
            MemoryLevel(name="GL", capacity=1 << 20, moves_to=("VRF", "RF")),
            MemoryLevel(
                name="VRF", capacity=16, unit="registers", vector_bytes=(32,),
                shares=shares.get("VRF", ()),
            ),
            MemoryLevel(name="RF", capacity=16, unit="registers", shares=shares.get("RF", ())),
        ),
    )  # fmt: skip


def test_a_move_into_a_shared_level_lowers_both() -> None:
    t = _target(VRF=("RF",), RF=("VRF",))
    assert t.sharing(1) == (1, 2)
    assert t.sharing(2) == (2, 1)
    assert subtract_limits(t, (100, 16, 16), 2, 4) == (100, 8, 8)
    assert subtract_limits(t, (100, 16, 2), 1, 4) is None  # RF has 2 left
    apart = _target()
    assert apart.sharing(1) == (1,)
    assert subtract_limits(apart, (100, 16, 16), 2, 4) == (100, 16, 8)


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


def _most_registers(impl: Impl, ctx: SynthesisContext, files: dict[int, int]) -> int:
    """The most registers of one file that moves on one path from the root hold at once."""
    worst = 0
    action = impl.action
    here = 0
    if isinstance(action, MoveAction):
        idx = ctx.target.level_index(action.dest.level)
        if idx in files:
            lv = ctx.target.levels[idx]
            here = memory_units(action.dest, lv)
    for child in impl.children:
        worst = max(worst, _most_registers(child, ctx, files))
    return here + worst


class _SharedZen1:
    """zen1 with its scalar and vector registers as one file of 16 (a plugin)."""

    @hookimpl
    def morello_targets(self) -> list[Target]:
        from morello_targets.zen1 import ZEN1

        levels = tuple(
            attrs.evolve(lv, shares=("RF",) if lv.name == "VRF" else ("VRF",))
            if lv.name in ("VRF", "RF")
            else lv
            for lv in ZEN1.levels
        )
        return [attrs.evolve(ZEN1, name="zen1_shared", levels=levels)]

    @hookimpl
    def morello_cost_coefficients(self, target: Target) -> CostCoefficients | None:
        from morello_targets.zen1 import ZEN1, morello_cost_coefficients

        return morello_cost_coefficients(ZEN1) if target.name == "zen1_shared" else None


@pytest.mark.parametrize("shape", [(8, 512, 512), (4, 1024, 1024)])
def test_programs_fit_a_shared_register_file(shape: tuple[int, int, int]) -> None:
    """zen1 itself keeps RF apart (gcc folds a scalar's load into the broadcast that uses
    it, BENCHMARKS.md), so these products keep up to 20 values "in registers" there; with
    the file shared, no path holds more than 16."""
    plugins = Plugins(modules=[_SharedZen1()])
    ctx = make_context("zen1_shared", plugins, [], None)
    m, k, n = shape
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    impl, _ = synthesize(build_program(func, ctx).spec, ctx, {})
    files = {ctx.target.level_index("VRF"): 16, ctx.target.level_index("RF"): 16}
    assert _most_registers(impl, ctx, files) <= 16
