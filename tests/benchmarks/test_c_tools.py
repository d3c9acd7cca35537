"""The C tools behind BENCHMARKS.md's notes build and run: the hand-written 1024^3 nest with
its switches (``benchmarks/matmul_1024_losses.c``), the 32x2048x512 nest that times B's
panel copies (``benchmarks/panel_copies.c``, which checks its own product), and the 1024^3
nest with B's strips packed for the L2, timed against a BLAS on the same buffers
(``benchmarks/matmul_1024_strips.c``), and the walk that reads a matrix's rows in bursts
(``benchmarks/stream_bursts.c``). The A/B harness
(``benchmarks/ab_programs.c``) is tested through ``benchmarks/ab.py`` (``test_ab.py``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FLAGS = ["-O3", "-mavx2", "-mfma", "-mtune=znver1"]
pytestmark = [
    pytest.mark.target("zen1"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found"),
]


@pytest.mark.parametrize(
    "switches",
    [[], ["-DLDA=1040", "-DLDC=1040"], ["-DA_TILES=1", "-DB_FIXED", "-DC_FIXED"], ["-DPACK_A"],
     ["-DPACK_A", "-DPACK_IN"], ["-DPACK_GLOBAL", "-DPACK_IN"], ["-DPREFETCH_C"]],
    ids=["as-generated", "padded", "all-cached", "packed-a", "packed-a-timed", "packed-global",
         "prefetch-c"],
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


@pytest.mark.parametrize(
    "switches", [[], ["-DPANELS", "-DW=64"], ["-DNOPACK"], ["-DAHEAD"], ["-DN=512"]],
    ids=["rows", "panels", "nopack", "ahead", "512"],
)  # fmt: skip
def test_strips_nest_builds_with_each_switch(tmp_path: Path, switches: list[str]) -> None:
    subprocess.run(
        ["gcc", *FLAGS, "-Wall", "-Werror", *switches, "-c",
         str(BENCHMARKS / "matmul_1024_strips.c"), "-o", str(tmp_path / "nest.o")],
        check=True,
    )  # fmt: skip


def _numpy_openblas() -> Path | None:
    """NumPy's bundled OpenBLAS (``numpy.libs`` of a wheel), if this NumPy has one."""
    import numpy

    libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    found = sorted(libs.glob("libscipy_openblas*.so*"))
    return found[0] if found else None


@pytest.mark.runs_code
@pytest.mark.parametrize("switches", [["-DN=256"], ["-DN=256", "-DAHEAD", "-DPANELS", "-DW=32"]])
def test_strips_nest_checks_itself_and_times_the_peer(tmp_path: Path, switches: list[str]) -> None:
    exe = tmp_path / "nest"
    subprocess.run(
        ["gcc", *FLAGS, *switches, str(BENCHMARKS / "matmul_1024_strips.c"), "-o", str(exe),
         "-ldl", "-lm"],
        check=True,
    )  # fmt: skip
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert re.fullmatch(r"nest [0-9.]+ GFLOP/s\n", out), out
    blas = _numpy_openblas()
    if blas is None:
        pytest.skip("this NumPy bundles no OpenBLAS to time against")
    env = {"OPENBLAS_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell"}
    out = subprocess.run(
        [str(exe), str(blas)], check=True, capture_output=True, text=True, env=env
    ).stdout
    assert re.fullmatch(
        r"nest [0-9.]+ GFLOP/s, peer [0-9.]+ GFLOP/s, peer time / nest time [0-9.]+\n", out
    ), out


@pytest.mark.runs_code
def test_strips_nest_reports_a_library_without_sgemm(tmp_path: Path) -> None:
    exe = tmp_path / "nest"
    subprocess.run(
        ["gcc", *FLAGS, "-DN=256", str(BENCHMARKS / "matmul_1024_strips.c"), "-o", str(exe),
         "-ldl", "-lm"],
        check=True,
    )  # fmt: skip
    libm = subprocess.run(
        ["gcc", "-print-file-name=libm.so.6"], check=True, capture_output=True, text=True
    ).stdout.strip()
    run = subprocess.run([str(exe), libm], capture_output=True, text=True)
    assert run.returncode == 2 and "exports no cblas_sgemm" in run.stderr, run.stderr


@pytest.mark.runs_code
def test_stream_bursts_reads_every_line_once_per_burst(tmp_path: Path) -> None:
    exe = tmp_path / "bursts"
    subprocess.run(
        ["gcc", *FLAGS, "-Wall", "-Werror", str(BENCHMARKS / "stream_bursts.c"), "-o", str(exe)],
        check=True,
    )
    out = subprocess.run(
        [str(exe), "8", "64", "2048"], check=True, capture_output=True, text=True
    ).stdout  # the tool exits 1 if a walk read more or fewer elements than it should
    bursts = re.findall(r"^rows at once 8, burst +(\d+) lines: [0-9.]+ GB/s$", out, re.M)
    assert bursts == ["1", "2", "4", "8", "12", "16", "20", "24", "28", "32", "48", "64"], out
    for args in (["0"], ["8", "4", "2048"], ["8", "64", "2040"], ["1", "2"]):
        run = subprocess.run([str(exe), *args], capture_output=True, text=True)
        assert run.returncode == 2 and run.stderr, args
