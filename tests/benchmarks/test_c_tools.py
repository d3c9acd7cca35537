"""The C tools behind BENCHMARKS.md's notes build and run: the A/B harness of two generated
programs (``benchmarks/ab_programs.c``), the hand-written 1024^3 nest with its switches
(``benchmarks/matmul_1024_losses.c``) and the 32x2048x512 nest that times B's panel copies
(``benchmarks/panel_copies.c``, which checks its own product)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FLAGS = ["-O3", "-mavx2", "-mfma", "-mtune=znver1"]
NAIVE = """
void old_f(const float *a, const float *b, float *c)
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


@pytest.mark.runs_code
def test_ab_harness_compares_and_times_two_programs(tmp_path: Path) -> None:
    ctx = make_context("zen1")
    text = "func f(a: f32[8, 32], b: f32[32, 16]) -> c: f32[8, 16] { c = matmul(a, b) }"
    (func,) = parse_spec_file("f.lark", text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    new = lower_to_c("f", [(prog, impl)], ctx).c_text.replace("void f(", "void new_f(")
    (tmp_path / "new.c").write_text(new, encoding="utf-8")
    (tmp_path / "old.c").write_text(NAIVE, encoding="utf-8")
    exe = tmp_path / "ab"
    defines = ["-DOLD=old_f", "-DNEW=new_f", '-DNAME="f"', "-DNARGS=3"]
    defines += ["-DS0=256", "-DS1=512", "-DS2=128", "-DS3=1", "-DFLOPS=8192.0"]
    subprocess.run(
        ["gcc", *FLAGS, *defines, str(BENCHMARKS / "ab_programs.c"), str(tmp_path / "old.c"),
         str(tmp_path / "new.c"), "-lm", "-o", str(exe)],
        check=True,
    )  # fmt: skip
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    found = re.search(r"largest difference (\S+);.*median (\S+) \(range (\S+)-(\S+)\)", out)
    assert found, out
    diff, median, low, high = (float(x) for x in found.groups())
    assert diff < 1e-4  # the same product, summed in another order
    assert 0 < low <= median <= high


@pytest.mark.parametrize(
    "switches",
    [[], ["-DLDA=1040", "-DLDC=1040"], ["-DA_TILES=1", "-DB_FIXED", "-DC_FIXED"], ["-DPACK_A"],
     ["-DPREFETCH_C"]],
    ids=["as-generated", "padded", "all-cached", "packed-a", "prefetch-c"],
)  # fmt: skip
def test_losses_nest_builds_with_each_switch(tmp_path: Path, switches: list[str]) -> None:
    subprocess.run(
        ["gcc", *FLAGS, *switches, "-c", str(BENCHMARKS / "matmul_1024_losses.c"),
         "-o", str(tmp_path / "nest.o")],
        check=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "switch", ["", "-DCOPY_ONCE", "-DB_FIXED", "-DAHEAD_BURST", "-DAHEAD_ROWS"]
)
def test_panel_copies_nest_builds_with_each_switch(tmp_path: Path, switch: str) -> None:
    subprocess.run(
        ["gcc", *FLAGS, "-Wall", "-Werror", *filter(None, [switch]), "-c",
         str(BENCHMARKS / "panel_copies.c"), "-o", str(tmp_path / "nest.o")],
        check=True,
    )  # fmt: skip


@pytest.mark.runs_code
@pytest.mark.parametrize("switch", ["", "-DAHEAD_ROWS"])
def test_panel_copies_nest_checks_itself_and_times(tmp_path: Path, switch: str) -> None:
    exe = tmp_path / "nest"
    subprocess.run(
        ["gcc", *FLAGS, *filter(None, [switch]), str(BENCHMARKS / "panel_copies.c"),
         "-o", str(exe)],
        check=True,
    )  # fmt: skip
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert len(re.findall(r"^[0-9.]+ GFLOP/s \([0-9.]+ us\)$", out, re.M)) == 3, out
