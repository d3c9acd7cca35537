"""A level whose capacity bounds each buffer on its own (``MemoryLevel.per_buffer``).

Limits are powers of two, so a buffer a Spec holds while its children run leaves them half
the level, however small the buffer is. In main memory that made a graph of a few dozen
statements fail: a chain of 33 ``relu`` of a 1x1 matrix stopped with "no implementation of
... fits the memory limits (GL 33554432 lines, ...)", since each intermediate, one line,
halved what the next ones had. Every target here marks its main memory ``per_buffer``: a
buffer there only has to fit, and a Spec's peak there is its largest buffer's.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.errors import NoImplementationError
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize
from morello.spec import add_peak, snap_up, subtract_limits
from morello.target import MemoryLevel, Target


def _target(per_buffer: bool) -> Target:
    return Target(
        name="t",
        description="",
        levels=(
            MemoryLevel(name="GL", capacity=64 * 64, moves_to=("RF",), per_buffer=per_buffer),
            MemoryLevel(name="RF", capacity=8, unit="registers"),
        ),
    )


@pytest.mark.parametrize(
    "level",
    [
        MemoryLevel(name="C", capacity=1024, addressed=False, per_buffer=True),
        MemoryLevel(name="C", capacity=8, unit="registers", per_buffer=True),
    ],
    ids=["cache", "registers"],
)
def test_only_an_addressed_level_in_bytes_bounds_each_buffer(level: MemoryLevel) -> None:
    with pytest.raises(ValueError, match="level C bounds each buffer on its own but is a cache"):
        Target(name="t", description="", levels=(MemoryLevel(name="GL", capacity=4096), level))


def test_a_buffer_in_a_per_buffer_level_only_has_to_fit() -> None:
    pooled, each = _target(False), _target(True)
    assert subtract_limits(pooled, (64, 8), 0, 1) == (32, 8)
    assert subtract_limits(each, (64, 8), 0, 1) == (64, 8)
    assert subtract_limits(each, (64, 8), 0, 64) == (64, 8)
    assert subtract_limits(each, (64, 8), 0, 65) is None
    assert subtract_limits(each, (64, 8), 1, 3) == (64, 4)  # other levels still add up
    peak = [8, 0]
    add_peak(each, peak, 0, 3)
    assert peak == [8, 0]  # the child's 8 lines are the larger buffer
    add_peak(pooled, peak, 0, 3)
    assert peak == [16, 0]  # 3 + 8, rounded up as limits are


@pytest.mark.parametrize("per_buffer", [False, True])
def test_peaks_are_the_least_limits_a_buffer_leaves_its_child_enough_under(
    per_buffer: bool,
) -> None:
    """A child needing ``r`` fits beside a buffer of ``u`` under limit ``L`` exactly when
    the peak ``add_peak`` gives is at most ``L``: the memo table relies on it."""
    t = _target(per_buffer)
    powers = [0, *(1 << i for i in range(8))]
    for limit in powers:
        for units in range(1, 130):
            left = subtract_limits(t, (limit, 8), 0, units)
            for need in powers:
                peak = [need, 0]
                add_peak(t, peak, 0, units)
                fits = left is not None and need <= left[0]
                assert fits == (peak[0] <= limit), (limit, units, need)
                assert peak[0] == snap_up(peak[0])


def _chain(n: int) -> str:
    return f"func f(x: f32[1, 1]) -> y: f32[1, 1] {{\n    y = {'relu(' * n}x{')' * n}\n}}\n"


def _pooled(ctx: SynthesisContext) -> SynthesisContext:
    """``ctx`` with its main memory's buffers counted together again."""
    first = attrs.evolve(ctx.target.levels[0], per_buffer=False)
    target = attrs.evolve(ctx.target, levels=(first, *ctx.target.levels[1:]))
    return attrs.evolve(ctx, target=target)


@pytest.mark.runs_code
def test_a_long_chain_of_intermediates_in_memory_is_synthesized(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    assert ctx.target.levels[0].per_buffer
    (func,) = parse_spec_file("chain.lark", _chain(40)).funcs
    prog = build_program(func, ctx)
    with pytest.raises(NoImplementationError, match="fits the memory limits"):
        synthesize(prog.spec, _pooled(ctx), {})
    impl, _ = synthesize(prog.spec, ctx, {})
    source = lower_to_c("chain", [(prog, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)  # raises if wrong
