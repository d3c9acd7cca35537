"""A stored decision is turned back into its action by enumerating only what could make it."""

from __future__ import annotations

import pytest

from morello.context import make_context
from morello.db.table import decision_of
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.expand import action_for, spec_actions
from morello.search.solve import Solution, synthesize

SPECS = {
    "matmul": "func f(a: f32[8, 12], b: f32[12, 24]) -> c: f32[8, 24] { c = matmul(a, b) }",
    "dense_relu": (
        "func f(x: f32[4, 16], w: f32[16, 8], b: f32[8]) -> y: f32[4, 8] {\n"
        "    y = relu(add(matmul(x, w), b))\n}"
    ),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_action_is_found_back_from_its_decision(name: str) -> None:
    ctx = make_context("zen1")
    (func,) = parse_spec_file(f"{name}.lark", SPECS[name]).funcs
    memo: dict[object, Solution | None] = {}
    synthesize(build_program(func, ctx).spec, ctx, memo)  # type: ignore[arg-type]
    checked = 0
    for spec in list(memo)[:1500]:
        for action in spec_actions(spec, ctx):  # type: ignore[arg-type]
            assert action_for(spec, decision_of(action), ctx) == action  # type: ignore[arg-type]
            checked += 1
    assert checked > 1000
