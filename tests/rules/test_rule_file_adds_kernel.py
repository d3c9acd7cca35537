"""Extensibility: a kernel (and a target) added by new files alone is used by synthesis.

Two additions, each written into ``tmp_path`` and loaded next to the built-in rules:

* ``x86_sse.rules``: 4-wide f32 kernels on 128-bit registers, for a target ``zen1sse``
  registered inline through a plugin object (zen1 with 16-byte vectors and ``__m128``
  declared). A 4x4x4 matmul, too narrow for the 8-wide kernels, must use the 4-wide FMA.
* ``x86_avx2_mem.rules``: an 8-wide FMA reading ``b`` straight from L1, for zen1 itself,
  through ``make_context(extra_rules=...)`` and through the CLI's ``--rules``.

Each Impl must call the new kernel, its C must appear in the output, and the compiled code
must match NumPy. No file under ``morello/``, ``rules/`` or ``targets/`` changes.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import morello_targets.zen1 as zen1_plugin
import pytest

from morello import hookimpl
from morello.cli import main
from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.nodes import KernelAction
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.target import CostCoefficients, Target, VectorType

pytestmark = [pytest.mark.target("zen1"), pytest.mark.runs_code]

SSE_RULES = """\
# Rule set "x86_sse": 4-wide f32 kernels for 128-bit vector registers (SSE + FMA).
# A `v4` operand is one 128-bit register holding 4 consecutive f32 of its tile.
requires sse, fma
include <immintrin.h>

kernel vzero_f32x4:
    c: f32[1, 4] @VRF v4 = zero()
    cost vector_op
    c "{c} = _mm_setzero_ps();"

kernel vload_f32x4:
    dst: f32[1, 4] @VRF v4 = move(src: f32[1, 4] @L1 contiguous)
    cost vector_load
    c "{dst} = _mm_loadu_ps({&src});"

kernel vstore_f32x4:
    dst: f32[1, 4] @L1 contiguous = move(src: f32[1, 4] @VRF v4)
    cost vector_store
    c "_mm_storeu_ps({&dst}, {src});"

kernel bcast_fma_f32x4:
    c: f32[1, 4] @VRF v4 += matmul(a: f32[1, 1] @RF|L1, b: f32[1, 4] @VRF v4)
    cost fma
    c "{c} = _mm_fmadd_ps(_mm_set1_ps({a}), {b}, {c});"
"""

MEM_FMA_RULES = """\
# Rule set "x86_avx2_mem": an 8-wide FMA whose b operand is read straight from L1.
requires avx2, fma
include <immintrin.h>

kernel bcast_fma_f32x8_mem:
    c: f32[1, 8] @VRF v8 += matmul(a: f32[1, 1] @RF|L1, b: f32[1, 8] @L1 contiguous)
    cost fma
    c "{c} = _mm256_fmadd_ps(_mm256_set1_ps({a}), _mm256_loadu_ps({&b}), {c});"
"""


def _with_sse_vectors(target: Target) -> Target:
    levels = tuple(
        attrs.evolve(lv, vector_bytes=(16, *lv.vector_bytes)) if lv.vector_bytes else lv
        for lv in target.levels
    )
    return attrs.evolve(
        target,
        name="zen1sse",
        description="zen1 with 128-bit vectors declared for the search (tests only)",
        levels=levels,
        vector_types=(*target.vector_types, VectorType(dtype="f32", lanes=4, c_type="__m128")),
    )


ZEN1_SSE = _with_sse_vectors(zen1_plugin.ZEN1)


class _SseTargetPlugin:
    """An inline plugin providing ``zen1sse``, with zen1's cost coefficients."""

    @hookimpl
    def morello_targets(self) -> list[Target]:
        return [ZEN1_SSE]

    @hookimpl
    def morello_cost_coefficients(self, target: Target) -> CostCoefficients | None:
        if target.name != ZEN1_SSE.name:
            return None
        return zen1_plugin.morello_cost_coefficients(zen1_plugin.ZEN1)


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    """A folder of extra rule files, loaded after the built-in ones."""
    folder = tmp_path / "rules"
    folder.mkdir()
    return folder


def matmul_program(ctx: SynthesisContext, m: int, k: int, n: int, name: str) -> Program:
    text = (
        f"func {name}(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] "
        "{ c = matmul(a, b) }"
    )
    return build_program(parse_spec_file(f"{name}.lark", text).funcs[0], ctx)


def kernels_in(impl: Impl) -> list[str]:
    return [n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)]


def compile_and_check(ctx: SynthesisContext, program: Program, impl: Impl, workdir: Path) -> str:
    """The C of ``program``, after checking that it compiles and matches NumPy."""
    c_text = lower_to_c(program.name, [(program, impl)], ctx).c_text
    lib = compile_shared(c_text, ctx.target, workdir, program.name)
    for seed in range(3):
        harness.check(lib, program, ctx, seed=seed)  # raises CheckFailed on a mismatch
    return c_text


def test_rule_file_and_inline_target_add_sse_kernel_used_by_synthesis(
    rule_dir: Path, tmp_path: Path
) -> None:
    (rule_dir / "x86_sse.rules").write_text(SSE_RULES, encoding="utf-8")
    plugins = Plugins(modules=[_SseTargetPlugin()])
    ctx = make_context("zen1sse", plugins, extra_rules=[rule_dir])
    assert "bcast_fma_f32x4" not in {k.name for k in make_context("zen1").ruleset.kernels}
    assert ctx.ruleset.kernel("bcast_fma_f32x4").rule_set == "x86_sse"

    program = matmul_program(ctx, 4, 4, 4, "mm_4x4x4")
    impl, _ = synthesize(program.spec, ctx)
    used = kernels_in(impl)
    assert "bcast_fma_f32x4" in used
    assert "mac_f32" not in used  # the 4-wide FMA replaces the scalar one everywhere
    c_text = compile_and_check(ctx, program, impl, tmp_path / "build")
    assert "_mm_fmadd_ps(_mm_set1_ps(" in c_text
    assert "__m128 " in c_text


def test_rule_file_sse_kernels_keep_8_wide_kernels_for_wide_tiles(
    rule_dir: Path, tmp_path: Path
) -> None:
    # 12 = 8 + 4 columns: the 8-wide FMA covers the first 8 and the new 4-wide one the tail.
    (rule_dir / "x86_sse.rules").write_text(SSE_RULES, encoding="utf-8")
    ctx = make_context("zen1sse", Plugins(modules=[_SseTargetPlugin()]), extra_rules=[rule_dir])
    program = matmul_program(ctx, 2, 4, 12, "mm_2x4x12")
    impl, _ = synthesize(program.spec, ctx)
    used = set(kernels_in(impl))
    assert {"bcast_fma_f32x8", "bcast_fma_f32x4"} <= used
    compile_and_check(ctx, program, impl, tmp_path / "build")


def test_rule_file_in_tmp_path_adds_kernel_preferred_by_synthesis(
    ctx: SynthesisContext, rule_dir: Path, tmp_path: Path
) -> None:
    (rule_dir / "x86_avx2_mem.rules").write_text(MEM_FMA_RULES, encoding="utf-8")
    extended = make_context(ctx.target.name, extra_rules=[rule_dir])
    program = matmul_program(extended, 1, 16, 8, "mm_1x16x8")
    impl, _ = synthesize(program.spec, extended)
    assert "bcast_fma_f32x8_mem" in kernels_in(impl)
    baseline, _ = synthesize(matmul_program(ctx, 1, 16, 8, "mm_1x16x8").spec, ctx)
    assert "bcast_fma_f32x8_mem" not in kernels_in(baseline)
    assert impl.cost < baseline.cost
    c_text = compile_and_check(extended, program, impl, tmp_path / "build")
    assert "_mm256_fmadd_ps(_mm256_set1_ps(a[" in c_text
    assert "_mm256_loadu_ps(&b[" in c_text


def test_rule_file_given_to_cli_rules_option_is_used(
    rule_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    (rule_dir / "x86_avx2_mem.rules").write_text(MEM_FMA_RULES, encoding="utf-8")
    spec = tmp_path / "mm.lark"
    spec.write_text(
        "func mm(a: f32[1, 16], b: f32[16, 8]) -> c: f32[1, 8] {\n    c = matmul(a, b)\n}\n",
        encoding="utf-8",
    )
    base = ["--target", target_name, "--rules", str(rule_dir), str(spec)]
    assert main([*base, "--impl"]) == 0
    assert "kernel bcast_fma_f32x8_mem" in capsys.readouterr().out
    assert main([*base, "--check"]) == 0
    out, err = capsys.readouterr()
    assert "_mm256_loadu_ps(&b[" in out
    assert "check passed: mm matches NumPy" in err
