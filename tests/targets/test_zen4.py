"""The zen4 target plugin (AMD Zen 4): its facts, and that its compiler flags build its code.

Its kernels and size policy are spr's, tested in tests/targets/test_spr.py in both factors.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import LoopAction
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.target import Target


@pytest.fixture(scope="module")
def zen4() -> Target:
    return Plugins().target("zen4")


def test_zen4_is_installed_through_the_entry_point_group() -> None:
    installed = {it.target.name: it for it in Plugins().targets()}
    assert installed["zen4"].plugin == "zen4"


def test_zen4_levels_an_l2_zen1s_l1_and_32_zmm_registers(zen4: Target) -> None:
    zen1 = Plugins().target("zen1")
    assert [lv.name for lv in zen4.levels] == ["GL", "L2", "L1", "VRF", "RF"]
    l2, l1, vrf = zen4.level("L2"), zen4.level("L1"), zen4.level("VRF")
    # The L2 holds whole Specs (residency); nothing is moved into it one operand at a time.
    assert (l2.capacity, l2.whole_specs, l2.addressed, l2.moves_to) == (
        1 << 20,
        True,
        False,
        ("L1",),
    )
    assert zen4.level("GL").moves_to == ("L1", "L2")
    assert (l1.capacity, l1.ways, l1.sets) == (zen1.level("L1").capacity, 8, 64)
    assert (vrf.capacity, vrf.unit, vrf.vector_bytes) == (32, "registers", (64,))
    assert zen4.vector_type("f32", 16).c_type == "__m512"


def test_zen4_shares_spr_kernels_and_lists_what_they_need(zen4: Target) -> None:
    spr = Plugins().target("spr")
    assert zen4.rule_sets == spr.rule_sets
    ctx = make_context("zen4")
    for kernel in ctx.ruleset.kernels:
        assert set(kernel.requires) <= set(zen4.isa), kernel.name


def test_zen4_coefficients_differ_from_spr_in_fma_latency() -> None:
    zen4, spr = make_context("zen4").coefficients, make_context("spr").coefficients
    assert zen4.chain_latency["VRF"] == 4 == spr.chain_latency["VRF"]
    zen1 = make_context("zen1").coefficients
    # The memory model is zen1's (a 32 KiB L1 of the same line prices), plus the L2.
    assert zen4.level_hit == {**zen1.level_hit, "L2": 6}
    assert zen4.stream_hit == zen1.stream_hit
    # Its register tiles can take 32 lines of a row at once; zen1's at most 15 ymm (7.5).
    assert zen4.stream_burst == {"GL": 16} and not zen1.stream_burst and not spr.stream_burst


def test_zen4_matvec_reads_its_rows_in_bursts_of_16_lines_at_most() -> None:
    """Without ``stream_burst`` the search takes 8 rows of the weights into a register tile
    of 448 outputs (28 lines of each row in turn); with it, no reduction loop over rows reads
    more than 16 lines of a row per trip (BENCHMARKS.md, "Bursts": 1.10-1.20 times as
    fast on a Zen 4)."""
    text = (
        "func f(x: f32[1, 2048], w: f32[2048, 16384]) -> y: f32[1, 16384] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    ctx = make_context("zen4")
    plain = attrs.evolve(ctx, coefficients=attrs.evolve(ctx.coefficients, stream_burst={}))

    def widest_burst(c) -> int:  # type: ignore[no-untyped-def]
        spec = build_program(parse_spec_file("<t>", text).funcs[0], c).spec
        impl, _ = synthesize(spec, c, {})
        widths = [
            n.action.body.operands[1].shape[1]
            for n in impl.walk()
            if isinstance(n.action, LoopAction) and n.action.var == "k" and n.action.step == 1
        ]
        assert widths
        return max(widths) * 4 // 64  # lines of a row per trip

    assert widest_burst(plain) > 16
    assert widest_burst(ctx) <= 16


def test_zen4_flags_compile_its_avx512_code(tmp_path: Path) -> None:
    """The installed GCC accepts the target's flags and builds a program using its kernels
    (compiling needs no AVX-512 CPU; running it is tested in test_spr.py's factor)."""
    ctx = make_context("zen4")
    text = "func mm(a: f32[14, 64], b: f32[64, 32]) -> c: f32[14, 32] {\n  c = matmul(a, b)\n}\n"
    program = build_program(parse_spec_file("mm.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    source = lower_to_c("mm", [(program, impl)], ctx)
    assert "_mm512_fmadd_ps" in source.c_text
    assert compile_shared(source.c_text, ctx.target, tmp_path).is_file()
