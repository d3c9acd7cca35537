"""The cost model's stream, latency and scratch features, on their own and in a decision.

* ``CostCoefficients.line_cost``: a tile of several long runs is priced as concurrent
  streams; short runs, or too many, are a strided walk.
* A reduction loop over register accumulators pays the chain latency once per trip, shared
  by the output's registers.
* A kernel's ``scratch`` registers must fit the Spec's limits for the kernel to match.
* Together they make zen1 walk several 16-column bf16 panels at once into many accumulators.
"""

from __future__ import annotations

import attrs
import pytest

from morello.context import SynthesisContext
from morello.impl import KernelAction, LoopAction, MoveAction
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.expand import spec_actions
from morello.search.solve import synthesize
from morello.target import CostCoefficients


def test_line_cost_streams_and_strides() -> None:
    c = CostCoefficients(
        level_hit={"GL": 20},
        named={},
        stream_hit={"GL": (20, 15, 12)},
        stream_lines=4,
    )
    assert c.line_cost("GL", 1, 1) == 20
    assert c.line_cost("GL", 2, 4) == 15
    assert c.line_cost("GL", 3, 100) == 12
    assert c.line_cost("GL", 2, 3) == 40  # runs too short to stream
    assert c.line_cost("GL", 4, 100) == 40  # more runs than streams
    plain = CostCoefficients(level_hit={"GL": 20}, named={})
    assert plain.line_cost("GL", 1, 1) == 20
    assert plain.line_cost("GL", 2, 100) == 40


def _program(ctx: SynthesisContext, text: str):  # type: ignore[no-untyped-def]
    return build_program(parse_spec_file("<t>", text).funcs[0], ctx)


def _loops_under_latency(ctx: SynthesisContext, latency: int) -> list[int]:
    """The loop nodes of the Impl of a 1x64x64 bf16 matvec under chain latency ``latency``."""
    coeffs = attrs.evolve(ctx.coefficients, chain_latency={"VRF": latency})
    sub = attrs.evolve(ctx, coefficients=coeffs)
    text = (
        "func f(x: bf16[1, 64], w: bf16[64, 64] packed_cols(16)) -> y: f32[1, 64] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    impl, _ = synthesize(_program(sub, text).spec, sub, {})
    return [n for n in impl.walk() if isinstance(n.action, LoopAction)]  # type: ignore[misc]


@pytest.mark.requires_isa("avx2", "fma")
def test_chain_latency_prefers_many_accumulators(ctx: SynthesisContext) -> None:
    # With a latency, the reduction loop runs over all 8 accumulators (k outside n); the
    # loop over one accumulator at a time would wait 8x as long per trip.
    loops = _loops_under_latency(ctx, 5)
    splits = [n for n in loops if n.action.var == "k"]
    assert splits, "no reduction loop"
    assert all(n.spec.output.shape == (1, 64) for n in splits), [n.spec.describe() for n in splits]


def test_scratch_must_fit_the_limits(ctx: SynthesisContext) -> None:
    kernel = ctx.ruleset.kernel("bcast_fma_bf16_f32x8")
    assert kernel.scratch == (("VRF", 2),)
    text = (
        "func f(x: bf16[1, 1] @L1, w: bf16[1, 8] @L1) -> y: f32[1, 8] @L1 {\n"
        "    y = matmul(x, w)\n}\n"
    )
    spec = _program(ctx, text).spec
    out = attrs.evolve(spec.operands[-1], level="VRF", vector_size=8)
    leaf = attrs.evolve(spec, operands=(*spec.operands[:-1], out), accum=True)
    vrf = ctx.target.level_index("VRF")

    def matches(vrf_limit: int) -> bool:
        limits = list(leaf.limits)
        limits[vrf] = vrf_limit
        s = attrs.evolve(leaf, limits=tuple(limits))
        return any(
            isinstance(a, KernelAction) and a.kernel == kernel.name for a in spec_actions(s, ctx)
        )

    assert matches(2)
    assert not matches(1)


@pytest.mark.requires_isa("avx2", "fma")
def test_gemma_walks_several_panels_into_many_accumulators(ctx: SynthesisContext) -> None:
    """The main loop reads at least four 16-column panels at once into 8 to 16 accumulators.

    (With tile sizes of 3 * 2^k it takes six panels, 96 outputs in 12 registers, and a tail of
    four; the two measured alike, BENCHMARKS.md.)
    """
    text = (
        "func f(x: bf16[1, 2048], w: bf16[2048, 16384] packed_cols(16)) -> y: f32[1, 16384] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    impl, _ = synthesize(_program(ctx, text).spec, ctx, {})
    vrf_moves = [
        n.action.dest
        for n in impl.walk()
        if isinstance(n.action, MoveAction) and n.action.dest.level == "VRF"
    ]
    widest = max(vrf_moves, key=lambda d: d.volume)
    assert widest.shape[1] >= 64 and 8 <= widest.volume // 8 <= 16, vrf_moves
