"""The size policies of tile_out and split: which loop steps a rule offers."""

from __future__ import annotations

import attrs
import pytest

from morello.context import SynthesisContext
from morello.nodes import LoopAction
from morello.rules.rewrites import OpPattern, SchemaRule


def _steps(policy: str, extent: int, ctx: SynthesisContext, matmul_spec) -> list[int]:  # type: ignore[no-untyped-def]
    rule = SchemaRule("tile_out", (OpPattern("*"),), policy)
    spec = matmul_spec(extent, 1, 1)
    return [a.step for a in rule.actions(spec, ctx) if isinstance(a, LoopAction) and a.var == "m"]


@pytest.mark.parametrize(
    ("policy", "extent", "want"),
    [
        ("pow2", 64, [1, 2, 4, 8, 16, 32]),
        ("pow2_3", 64, [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]),
        ("pow2_3", 7, [1, 2, 3, 4, 6]),
        ("pow2_3", 3, [1, 2]),
        ("pow2_3", 1, []),
        ("all", 5, [1, 2, 3, 4]),
    ],
)
def test_size_policies(
    policy: str, extent: int, want: list[int], ctx: SynthesisContext, matmul_spec
) -> None:
    assert _steps(policy, extent, ctx, matmul_spec) == want


def test_a_step_that_does_not_divide_gets_a_tail(ctx: SynthesisContext, matmul_spec) -> None:
    rule = SchemaRule("tile_out", (OpPattern("*"),), "pow2_3")
    loops = {
        a.step: a
        for a in rule.actions(matmul_spec(64, 1, 1), ctx)
        if isinstance(a, LoopAction) and a.var == "m"
    }
    assert (loops[24].trips, loops[24].tail.operands[0].shape[0]) == (2, 16)
    assert loops[16].tail is None


def _in_registers(ctx: SynthesisContext, matmul_spec, a_in_registers: bool):  # type: ignore[no-untyped-def]
    """A 3 x 1 x (2 vectors) product accumulating into vector registers, B in memory and A
    in memory or in scalar registers."""
    vt = next(vt for vt in ctx.target.vector_types if vt.dtype == "f32")
    vec = next(lv for lv in ctx.target.levels if lv.counts_registers and lv.vector_bytes)
    scalar = next(lv for lv in ctx.target.levels if lv.counts_registers and not lv.vector_bytes)
    spec = matmul_spec(3, 1, 2 * vt.lanes)
    a, b, c = spec.operands
    c = attrs.evolve(c, level=vec, vector_size=vt.lanes)
    if a_in_registers:
        a = attrs.evolve(a, level=scalar)
    return attrs.evolve(spec, operands=(a, b, c), accum=True)


def _loop_trips(spec, ctx: SynthesisContext, var: str) -> list[int]:  # type: ignore[no-untyped-def]
    rule = SchemaRule("tile_out", (OpPattern("*"),), "pow2_3")
    return [
        a.trips + (a.tail is not None)
        for a in rule.actions(spec, ctx)
        if isinstance(a, LoopAction) and a.var == var
    ]


def test_an_unrolled_loop_leaves_no_input_it_does_not_run_along_in_memory(
    ctx: SynthesisContext, matmul_spec
) -> None:
    # Along n the loop is unrolled (C is in registers) and would load A's scalars in every
    # trip, which the compiler keeps in registers across them: offered only once A is in
    # registers, where the model counts them. Along m, B stays in memory: never offered.
    in_memory = _in_registers(ctx, matmul_spec, a_in_registers=False)
    assert _loop_trips(in_memory, ctx, "n") == []
    assert _loop_trips(in_memory, ctx, "m") == []
    a_held = _in_registers(ctx, matmul_spec, a_in_registers=True)
    assert 2 in _loop_trips(a_held, ctx, "n")
    assert _loop_trips(a_held, ctx, "m") == []
