"""The size policies of tile_out and split: which loop steps a rule offers."""

from __future__ import annotations

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
