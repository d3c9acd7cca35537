"""Tiles of packed layouts: every program near the chosen one computes the right answer.

A tile narrower than a packed block lies within one block only if its extent divides the
block; a 12-wide tile of 16-wide panels spans two panels, and such a program once computed
wrong answers (found by ``calibrate``, which checks every rival it times).
"""

from __future__ import annotations

import pytest

from morello.codegen.fidelity import time_impls
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.layout import packed_cols
from morello.search.kbest import KBest


def test_a_tile_across_packed_blocks_has_no_layout() -> None:
    panels = packed_cols(2, 16)
    assert panels.tile((64, 256), (64, 12)) is None
    assert panels.tile((64, 256), (64, 8)) is not None
    assert panels.tile((64, 256), (64, 32)) is not None
    assert panels.tile((64, 12), (64, 6)) is not None  # the parent is within one block


@pytest.mark.runs_code
@pytest.mark.times_code
def test_rivals_of_a_packed_product_are_correct(ctx: SynthesisContext) -> None:
    text = "func f(x: f32[1, 32], w: f32[32, 128] packed_cols(16)) -> y: f32[1, 128] {\n"
    text += "    y = matmul(x, w)\n}\n"
    program = build_program(parse_spec_file("f.lark", text).funcs[0], ctx)
    kbest = KBest(ctx, {}, distinct_costs=True)
    import random

    rng = random.Random(1)
    impls = list(kbest.impls(program.spec, 10))
    impls += [kbest.sample(program.spec, rng, 0.3) for _ in range(30)]
    time_impls(program, impls, ctx, repeats=1, min_batch_s=0.0001)  # checks each first
