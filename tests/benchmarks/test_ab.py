"""``benchmarks/ab.py`` times two C programs of one spec against each other, and the file
with switches behind BENCHMARKS.md's note on dense_relu's packing
(``benchmarks/dense_relu_copies.c``) computes the layer without them and with the switches
that keep its values."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize

ROOT = Path(__file__).resolve().parents[2]
COPIES = ROOT / "benchmarks" / "dense_relu_copies.c"
DENSE_RELU = ROOT / "examples" / "dense_relu.lark"
SPEC = "func f(a: f32[8, 32], b: f32[32, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n"
NAIVE = """
void f(const float *a, const float *b, float *c)
{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 16; j++) {
            float s = 0;
            for (int k = 0; k < 32; k++) s += a[32 * i + k] * b[16 * k + j];
            c[16 * i + j] = s;
        }
}
"""
pytestmark = [
    pytest.mark.target("zen1"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found"),
]


@pytest.fixture
def ab(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("ab")


def _files(tmp_path: Path, text: str = SPEC, naive_c: str = NAIVE) -> tuple[Path, Path, Path]:
    """The spec file of ``text``, a naive C version of its function and the generated one."""
    spec = tmp_path / "f.lark"
    spec.write_text(text, encoding="utf-8")
    ctx = make_context("zen1")
    (func,) = parse_spec_file(str(spec), text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    generated, naive = tmp_path / "generated.c", tmp_path / "naive.c"
    generated.write_text(lower_to_c(func.name, [(prog, impl)], ctx).c_text, encoding="utf-8")
    naive.write_text(naive_c, encoding="utf-8")
    return spec, naive, generated


def test_the_harness_is_given_the_spec_s_arguments_and_work(ab: ModuleType) -> None:
    harness = ab.harness_for(DENSE_RELU, "zen1")
    assert harness.name == "dense_relu"
    assert harness.sizes == (128 * 512, 512 * 512, 512, 128 * 512)
    product = 2 * 128 * 512 * 512
    assert product <= harness.flops <= product + 4 * 128 * 512  # the bias add and ReLU


@pytest.mark.runs_code
def test_two_programs_are_checked_against_each_other_and_timed(
    tmp_path: Path, ab: ModuleType
) -> None:
    spec, naive, generated = _files(tmp_path)
    (result,) = ab.compare(spec, naive, generated)
    assert result.difference < 1e-4  # the same product, summed in another order
    assert result.low <= result.ratio <= result.high
    assert result.old_us > 0 and result.new_us > 0


@pytest.mark.runs_code
def test_each_placement_of_the_buffers_is_timed(tmp_path: Path, ab: ModuleType) -> None:
    spec, naive, generated = _files(tmp_path)
    results = ab.compare(spec, naive, generated, runs=2, placements=2)
    assert [r.placement for r in results] == [0, 0, 1, 1]
    assert all(r.difference < 1e-4 for r in results)


@pytest.mark.runs_code
def test_a_program_that_computes_something_else_shows_its_difference(
    tmp_path: Path, ab: ModuleType
) -> None:
    spec, _, generated = _files(tmp_path)
    wrong = tmp_path / "wrong.c"
    wrong.write_text(NAIVE.replace("s += a", "s -= a"), encoding="utf-8")
    (result,) = ab.compare(spec, generated, wrong)
    assert result.difference > 0.01


@pytest.mark.runs_code
def test_a_flag_for_new_alone_builds_new_otherwise(tmp_path: Path, ab: ModuleType) -> None:
    spec, _, _ = _files(tmp_path)
    switched = tmp_path / "switched.c"
    switched.write_text("#ifndef OP\n#define OP +=\n#endif\n" + NAIVE.replace("s += a", "s OP a"))
    (same,) = ab.compare(spec, switched, switched)
    assert same.difference == 0
    (flagged,) = ab.compare(spec, switched, switched, new_flags=["-DOP=-="])
    assert flagged.difference > 0.01  # NEW negated its sums, OLD did not
    assert ab.main([str(spec), str(switched), str(switched), "--flag-new=-mno-such-flag"]) == 2


BF16_SPEC = "func g(x: bf16[1, 64], w: bf16[64, 32]) -> y: f32[1, 32] { y = matmul(x, w) }\n"
BF16_NAIVE = """
#include <stdint.h>
#include <string.h>
static float widen(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, 4);
    return v;
}
void g(const uint16_t *x, const uint16_t *w, float *y)
{
    for (int n = 0; n < 32; n++) {
        float s = 0;
        for (int k = 0; k < 64; k++) s += widen(x[k]) * widen(w[32 * k + n]);
        y[n] = s;
    }
}
"""


def test_the_harness_is_given_each_argument_s_element_type(ab: ModuleType) -> None:
    harness = ab.harness_for(ROOT / "examples" / "gemma_matvec.lark", "zen1")
    assert harness.c_types == ("uint16_t", "uint16_t", "float")
    assert harness.kinds == (1, 1, 0)  # bf16 bit patterns in, f32 out
    assert harness.sizes == (2048, 2048 * 16384, 16384)


RELU_SPEC = "func r(a: f32[64, 1024]) -> b: f32[64, 1024] { b = relu(a) }\n"
RELU_NAIVE = """
void r(const float *a, float *b)
{
    for (int i = 0; i < 65536; i++) b[i] = a[i] > 0 ? a[i] : 0;
}
"""


@pytest.mark.runs_code
@pytest.mark.parametrize(
    ("text", "naive_c", "mistake"),
    [
        (BF16_SPEC, BF16_NAIVE, ("s += widen", "s -= widen")),
        (RELU_SPEC, RELU_NAIVE, (": 0;", ": a[i];")),  # the inputs include negative values
    ],
    ids=["bf16", "one-input"],
)
def test_other_element_types_and_arities_are_checked_and_timed(
    tmp_path: Path, ab: ModuleType, text: str, naive_c: str, mistake: tuple[str, str]
) -> None:
    spec, naive, generated = _files(tmp_path, text, naive_c)
    wrong = tmp_path / "wrong.c"
    wrong.write_text(naive_c.replace(*mistake), encoding="utf-8")
    (result,) = ab.compare(spec, naive, generated)
    assert result.difference < 1e-4  # bf16 inputs are read as the same values by both
    assert result.old_us > 0 and result.new_us > 0
    (result,) = ab.compare(spec, naive, wrong)
    assert result.difference > 0.01


def test_bad_input_is_a_one_line_error(tmp_path: Path, ab: ModuleType, capsys) -> None:
    spec, naive, _ = _files(tmp_path)
    other = tmp_path / "other.c"
    other.write_text(NAIVE.replace("void f(", "void g("), encoding="utf-8")
    assert ab.main([str(spec), str(naive), str(other)]) == 2
    assert "no definition of void f(...)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main([str(spec), str(naive), str(naive), "--placements", "0"])
    assert "--placements must be at least 1" in capsys.readouterr().err
    assert ab.main([str(spec), str(naive), str(naive), "--define-new", "A-B"]) == 2
    assert "not a C macro name" in capsys.readouterr().err
    two = tmp_path / "two.lark"
    two.write_text(SPEC + SPEC.replace("func f", "func g"), encoding="utf-8")
    assert ab.main([str(two), str(naive), str(naive)]) == 2
    assert "the harness times one function" in capsys.readouterr().err
    broken = tmp_path / "broken.c"
    broken.write_text(NAIVE.replace("s = 0;", "s = 0"), encoding="utf-8")
    assert ab.main([str(spec), str(naive), str(broken)]) == 2
    assert "the C compiler failed" in capsys.readouterr().err


@pytest.mark.runs_code
def test_dense_relu_copies_computes_the_layer(
    tmp_path: Path, benchmark_script: Callable[[str], ModuleType]
) -> None:
    script = benchmark_script("fused_dense_relu")
    fn = script.compile_c(COPIES, "dense_relu", tmp_path)
    x, w, b, y = script.operands(seed=3)
    assert script.relative_error(fn, x, w, b, y) < 1e-5  # y starts as NaN


@pytest.mark.runs_code
@pytest.mark.parametrize(
    ("switch", "same_values"),
    [("PREFETCH", True), ("FIRST_TILE", True), ("NOCOPY", False), ("CACHED", False)],
)
def test_dense_relu_copies_switches(ab: ModuleType, switch: str, same_values: bool) -> None:
    (result,) = ab.compare(DENSE_RELU, COPIES, COPIES, new_defines=[switch])
    assert (result.difference == 0) == same_values
