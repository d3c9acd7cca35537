"""The spr target plugin (Intel Sapphire Rapids): its facts, its size policy, and its
AVX-512 kernels (16-lane f32, masked tails, the bf16 pair dot product) checked against NumPy.
zen4 (tests/targets/test_zen4.py) shares the kernels and the size policy, so those tests run
in its factor too, against zen4's context.

Tests that run generated code are skipped on CPUs without AVX-512F/BW/VL and AVX512_BF16
(or fail there with MORELLO_REQUIRE_ISA=1).
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.impl import Impl
from morello.lang import parse_rule_file
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import KernelAction, MoveAction
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.spec import memory_units
from morello.target import Target

# Run in the factors of the AVX-512 targets (tox -e py311-spr, py311-zen4, or pytest --target
# spr): the other factors' kernels are not these.
pytestmark = pytest.mark.target("spr", "zen4")

AVX512 = ("avx512f", "avx512bw", "avx512vl", "avx512_bf16")
KERNELS = Path(__file__).resolve().parents[2] / "rules" / "kernels"


@pytest.fixture(scope="module")
def spr() -> Target:
    return Plugins().target("spr")


@pytest.fixture(scope="module")
def ctx(target_name: str) -> SynthesisContext:
    """The AVX-512 target under test (spr or zen4), whose rule sets are the same."""
    return make_context(target_name)


def test_spr_is_installed_through_the_entry_point_group() -> None:
    installed = {it.target.name: it for it in Plugins().targets()}
    assert installed["spr"].plugin == "spr"


def test_spr_levels_l1_and_32_zmm_registers(spr: Target) -> None:
    assert [lv.name for lv in spr.levels] == ["GL", "L1", "VRF", "RF"]
    l1, vrf = spr.level("L1"), spr.level("VRF")
    assert (l1.capacity, l1.addressed, l1.ways, l1.sets) == (48 * 1024, False, 12, 64)
    assert (vrf.capacity, vrf.unit, vrf.vector_bytes) == (32, "registers", (64,))
    vt = spr.vector_type("f32", 16)
    assert vt is not None and vt.c_type == "__m512"


def test_spr_rule_files_need_only_what_its_isa_lists(ctx: SynthesisContext) -> None:
    assert set(AVX512) <= set(ctx.target.isa)
    kernels = {k.rule_set: set(k.requires) for k in ctx.ruleset.kernels}
    assert {"x86_avx512", "x86_avx512_exp"} <= set(kernels)
    for rule_set, requires in kernels.items():
        assert requires <= set(ctx.target.isa), rule_set


def test_spr_tiles_by_seven_times_powers_of_two(ctx: SynthesisContext) -> None:
    assert ctx.size_policies["pow2x7"](100) == [7, 14, 28, 56]
    assert ctx.size_policies["pow2x7"](7) == []
    # zen1 does not name the policy: its rule sets tile by 2^k and 3 * 2^k only.
    zen1 = make_context("zen1")
    sizes = {getattr(r, "sizes", None) for r in zen1.ruleset.rules}
    assert "pow2_3" in sizes and "pow2x7" not in sizes
    assert "pow2x7" in {getattr(r, "sizes", None) for r in ctx.ruleset.rules}


def _synthesized_and_checked(
    ctx: SynthesisContext, unit: str, text: str, tmp_path: Path
) -> tuple[Impl, str, set[str]]:
    """The Impl, C and kernels of the one function in ``text``, its C checked against NumPy."""
    program = build_program(parse_spec_file(f"{unit}.lark", text).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    source = lower_to_c(unit, [(program, impl)], ctx)
    lib = compile_shared(source.c_text, ctx.target, tmp_path)
    for seed in range(2):
        check(lib, program, ctx, seed=seed)  # raises if wrong
    kernels = {n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)}
    return impl, source.c_text, kernels


@pytest.mark.runs_code(*AVX512)
def test_spr_register_tile_of_28_accumulators(ctx: SynthesisContext, tmp_path: Path) -> None:
    """A 14 x 32 output is one register tile: 28 zmm accumulators, 2 rows of B, 1 broadcast."""
    text = "func mm(a: f32[14, 64], b: f32[64, 32]) -> c: f32[14, 32] {\n  c = matmul(a, b)\n}\n"
    impl, c_text, kernels = _synthesized_and_checked(ctx, "mm", text, tmp_path)
    assert "bcast_fma_f32x16" in kernels
    vrf = ctx.target.level("VRF")
    tiles = [
        n.action.dest
        for n in impl.walk()
        if isinstance(n.action, MoveAction)
        and n.action.dest.level.name == "VRF"
        and n.action.operand == 2
    ]
    assert max(memory_units(t, vrf) for t in tiles) == 28, [t.describe() for t in tiles]
    assert "_mm512_fmadd_ps" in c_text


@pytest.mark.runs_code(*AVX512)
def test_spr_masked_tail_of_a_row(ctx: SynthesisContext, tmp_path: Path) -> None:
    """20 columns: one zmm of 16, then a masked tail of 4 lanes (mask 0xf), not scalar code."""
    text = "func mm(a: f32[4, 8], b: f32[8, 20]) -> c: f32[4, 20] {\n  c = matmul(a, b)\n}\n"
    _, c_text, kernels = _synthesized_and_checked(ctx, "mm", text, tmp_path)
    assert "bcast_fma_tail_f32x16" in kernels
    assert "_mm512_mask_storeu_ps" in c_text and "0xfu" in c_text
    assert "mac_f32" not in kernels


@pytest.mark.runs_code(*AVX512)
@pytest.mark.parametrize("n", [7, 15, 23, 40])
def test_spr_masked_relu_tails(ctx: SynthesisContext, tmp_path: Path, n: int) -> None:
    """Rows of n that are not whole zmm registers end in a masked tail."""
    text = f"func r(x: f32[3, {n}]) -> y: f32[3, {n}] {{\n  y = relu(x)\n}}\n"
    _, c_text, kernels = _synthesized_and_checked(ctx, "r", text, tmp_path)
    assert "vrelu_tail_f32x16" in kernels
    assert "_mm512_mask_storeu_ps" in c_text


@pytest.mark.runs_code(*AVX512)
def test_spr_bf16_matvec_runs_the_pair_dot_product(ctx: SynthesisContext, tmp_path: Path) -> None:
    text = (
        "func mv(x: bf16[1, 256], w: bf16[256, 64] packed_cols(16)) -> y: f32[1, 64] {\n"
        "  y = matmul(x, w)\n}\n"
    )
    _, c_text, kernels = _synthesized_and_checked(ctx, "mv", text, tmp_path)
    assert "dpbf16_f32x16" in kernels
    assert "_mm512_dpbf16_ps" in c_text


@pytest.mark.slow  # minutes of search: dense_relu about 6, softmax about 1
@pytest.mark.target("spr")  # zen4's graphs are checked by bench (BENCHMARKS.md), not here
@pytest.mark.runs_code(*AVX512)
@pytest.mark.parametrize("unit", ["softmax", "dense_relu"])
def test_spr_graph_examples_match_numpy(ctx: SynthesisContext, tmp_path: Path, unit: str) -> None:
    text = (Path(__file__).resolve().parents[2] / "examples" / f"{unit}.lark").read_text()
    _, c_text, _ = _synthesized_and_checked(ctx, unit, text, tmp_path)
    assert "__m512" in c_text


def _exp_loop(kernel_file: str, name: str, lanes: int) -> str:
    # The file's exp kernel for a row of ``lanes`` (one declaration also gives it for a
    # vector, ``vexp1_...``, with the same body).
    (kernel,) = [
        k for k in parse_rule_file(KERNELS / kernel_file).kernels if k.name == f"vexp_f32x{lanes}"
    ]
    ps = "_mm256" if lanes == 8 else "_mm512"
    body = "\n".join(kernel.render({"src": ("x", "&x"), "dst": ("y", "&y")}))
    return (
        f"void {name}(const float *in, float *out, size_t n) {{\n"
        f"    for (size_t i = 0; i < n; i += {lanes}) {{\n"
        f"        __m{lanes * 32} x = {ps}_loadu_ps(in + i), y;\n"
        f"{body}\n"
        f"        {ps}_storeu_ps(out + i, y);\n"
        "    }\n}\n"
    )


@pytest.mark.runs_code(*AVX512, "avx2", "fma")
def test_spr_exp_equals_the_avx2_exp_bit_for_bit(tmp_path: Path) -> None:
    """vexp_f32x16 computes each lane as vexp_f32x8 does, whose accuracy is measured over
    every f32 (tests/rules/test_exp_kernel.py), so both give the same bits."""
    src = tmp_path / "exp.c"
    src.write_text(
        "#include <immintrin.h>\n#include <stddef.h>\n"
        + _exp_loop("x86_avx2_exp.rules", "exp8", 8)
        + _exp_loop("x86_avx512_exp.rules", "exp16", 16)
    )
    lib = tmp_path / "libexp.so"
    cmd = ["gcc", "-O2", "-march=sapphirerapids", "-shared", "-fPIC", "-o", str(lib), str(src)]
    subprocess.run(cmd, check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    rng = np.random.default_rng(15)
    edges = [0.0, -0.0, 88.72283, 88.7229, -87.3365, -103.97, -110, 89, 1e30, -1e30]
    bits = rng.integers(0, 2**32, size=100_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate(
        [
            np.linspace(-104.0, 89.0, 200_000, dtype=np.float32),
            np.array([*edges, np.inf, -np.inf, np.nan], dtype=np.float32),
            bits.view(np.float32),
        ]
    )
    x = np.concatenate([x, np.zeros(-len(x) % 16, np.float32)])
    outs = []
    for fn in ("exp8", "exp16"):
        out = np.empty_like(x)
        ptr = ctypes.POINTER(ctypes.c_float)
        getattr(so, fn)(x.ctypes.data_as(ptr), out.ctypes.data_as(ptr), ctypes.c_size_t(len(x)))
        outs.append(out.view(np.uint32))
    assert np.array_equal(outs[0], outs[1])
    finite = np.abs(x) < 80
    got = outs[1].view(np.float32)[finite]
    assert np.allclose(got, np.exp(x[finite].astype(np.float64)), rtol=1e-7, atol=0)
