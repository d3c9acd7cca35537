"""The zen1 target plugin: its facts, its flags, and code that runs on any AVX2+FMA CPU."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import KernelAction, MoveAction
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.spec import memory_units
from morello.target import Target


@pytest.fixture(scope="module")
def zen1() -> Target:
    return Plugins().target("zen1")


def test_zen1_is_installed_through_the_entry_point_group() -> None:
    installed = {it.target.name: it for it in Plugins().targets()}
    assert installed["zen1"].plugin == "zen1"
    assert installed["zen1"].dist.startswith("morello ")


def test_zen1_memory_levels_slowest_first(zen1: Target) -> None:
    assert [lv.name for lv in zen1.levels] == ["GL", "L1", "VRF", "RF"]
    assert all(lv.line_bytes == 64 for lv in zen1.levels if not lv.counts_registers)


def test_zen1_l1_is_a_32_kib_cache(zen1: Target) -> None:
    l1 = zen1.level("L1")
    assert l1.capacity == 32 * 1024
    assert l1.addressed is False
    assert (l1.ways, l1.sets) == (8, 64)
    assert l1.packs == ("row_major",)


def test_zen1_has_16_vector_and_16_scalar_registers(zen1: Target) -> None:
    vrf, rf = zen1.level("VRF"), zen1.level("RF")
    assert (vrf.capacity, vrf.unit, vrf.vector_bytes) == (16, "registers", (32,))
    assert (rf.capacity, rf.unit) == (16, "registers")


def test_zen1_vectors_are_8_f32_lanes_of_256_bits(zen1: Target) -> None:
    vt = zen1.vector_type("f32", 8)
    assert vt is not None
    assert vt.lanes * 4 == zen1.level("VRF").vector_bytes[0]


def test_zen1_flags_produce_code_for_any_avx2_fma_cpu(zen1: Target) -> None:
    flags = zen1.compiler.flags
    assert "-mavx2" in flags
    assert "-mfma" in flags
    assert any(f.startswith("-mtune=") for f in flags)
    assert not any(f.startswith(("-march", "-mavx512")) for f in flags)


def _assembly(c_text: str, cc: str, flags: tuple[str, ...], tmp_path: Path) -> str:
    src = tmp_path / "unit.c"
    src.write_text(c_text, encoding="utf-8")
    cmd = [cc, *flags, "-std=c11", "-S", str(src), "-o", "-"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


@pytest.mark.runs_code
def test_zen1_stores_a_register_tile_in_whole_256_bit_stores(tmp_path: Path) -> None:
    """-mtune=znver1 alone writes each 256-bit store to C (not known 32-byte aligned) as two
    128-bit halves, twice the stores of a tile stored every few steps of k; zen1's flags keep
    them whole (BENCHMARKS.md, "Whole 256-bit stores")."""
    text = "func mm(a: f32[8, 64], b: f32[64, 48]) -> c: f32[8, 48] {\n  c = matmul(a, b)\n}\n"
    ctx, _, c_text = _synthesized_and_checked("mm", text, tmp_path)
    cc, flags = ctx.target.compiler.cc, ctx.target.compiler.flags
    whole = _assembly(c_text, cc, flags, tmp_path)
    assert re.search(r"vmovups\s+%ymm\d+, ", whole), "no 256-bit store of a register tile"
    assert "vextractf128" not in whole
    split = _assembly(c_text, cc, tuple(f for f in flags if "split-unaligned" not in f), tmp_path)
    assert "vextractf128" in split  # what the flag is there to prevent


def test_zen1_enables_portable_and_avx2_rule_sets(zen1: Target) -> None:
    assert set(zen1.rule_sets) >= {"core", "scalar", "x86_avx2"}
    assert {"avx2", "fma"} <= set(zen1.isa)
    assert not any(f.startswith("avx512") for f in zen1.isa)


def test_zen1_cost_coefficients_cover_every_level(zen1: Target) -> None:
    coeffs = Plugins().cost_coefficients(zen1)
    assert set(coeffs.level_hit) == {lv.name for lv in zen1.levels}
    assert coeffs.level_hit["GL"] > coeffs.level_hit["L1"] >= coeffs.level_hit["VRF"]


def _synthesized_and_checked(
    unit: str, text: str, tmp_path: Path
) -> tuple[SynthesisContext, Impl, str]:
    """The Impl and C of the one function in ``text``, after checking the C against NumPy."""
    ctx = make_context("zen1")
    program = build_program(parse_spec_file(f"{unit}.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    source = lower_to_c(unit, [(program, impl)], ctx)
    check(compile_shared(source.c_text, ctx.target, tmp_path), program, ctx)  # raises if wrong
    return ctx, impl, source.c_text


@pytest.mark.runs_code
def test_zen1_small_matmul_uses_vector_kernels_and_matches_numpy(tmp_path: Path) -> None:
    text = "func matmul_4x8(a: f32[4, 4], b: f32[4, 8]) -> c: f32[4, 8] {\n  c = matmul(a, b)\n}\n"
    ctx, impl, c_text = _synthesized_and_checked("matmul_4x8", text, tmp_path)
    kernels = {n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)}
    assert any(ctx.ruleset.kernel(k).requires for k in kernels), kernels
    assert "#include <immintrin.h>" in c_text


@pytest.mark.runs_code
def test_zen1_register_tile_holds_12_accumulators_and_matches_numpy(tmp_path: Path) -> None:
    """Tile sizes of 3 * 2^k let the search keep 12 of the 16 ymm registers as accumulators."""
    text = "func mm(a: f32[12, 32], b: f32[32, 48]) -> c: f32[12, 48] {\n  c = matmul(a, b)\n}\n"
    ctx, impl, _ = _synthesized_and_checked("mm", text, tmp_path)
    vrf = ctx.target.level("VRF")
    tiles = [
        n.action.dest
        for n in impl.walk()
        if isinstance(n.action, MoveAction)
        and n.action.dest.level.name == "VRF"
        and n.action.operand == 2
    ]
    assert tiles
    assert max(memory_units(t, vrf) for t in tiles) == 12, [t.describe() for t in tiles]
