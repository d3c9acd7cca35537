"""``--threads`` and ``parallel func`` on the command line: a parallel func is either run on
several threads, or said to run on one (a located warning), or with one thread a located
error; never silently serial."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from morello.cli import _bench_text, main
from morello.plugins import Plugins

TINY = "parallel func f(a: f32[2, 2], b: f32[2, 2]) -> c: f32[2, 2] {\n    c = matmul(a, b)\n}\n"
LARGE = (
    "parallel func g(a: f32[256, 64], b: f32[64, 64]) -> c: f32[256, 64] {\n"
    "    c = matmul(a, b)\n"
    "}\n"
)


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.lark"
    path.write_text(text, encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, list[str], str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, err.splitlines(), out


@pytest.fixture
def processors(target_name: str) -> int:
    (installed,) = [it for it in Plugins().targets() if it.target.name == target_name]
    n = installed.target.processors
    if n < 2:
        pytest.skip(f"target {target_name} has one processor")
    return n


def test_parallel_func_with_one_thread_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str, processors: int
) -> None:
    path = _spec(tmp_path, TINY)
    code, err, out = _run(capsys, "--target", target_name, "--no-db", "--threads", "1", path)
    assert code == 2
    assert err == [
        f"{path}:1:1: error: parallel func f needs --threads 2 or more (target {target_name} "
        f"has {processors} processors), found --threads 1",
        "    parallel func f(a: f32[2, 2], b: f32[2, 2]) -> c: f32[2, 2] {",
        "    ^",
    ]
    assert out == ""


@pytest.mark.parametrize("threads", ["0", "too many"])
def test_threads_out_of_range_is_an_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target_name: str,
    processors: int,
    threads: str,
) -> None:
    n = "0" if threads == "0" else str(processors + 1)
    code, err, _ = _run(capsys, "--target", target_name, "--threads", n, _spec(tmp_path, TINY))
    assert code == 2
    assert err == [
        f"morello: error: --threads must be from 1 to the {processors} processors of target "
        f"{target_name}, found {n}"
    ]


def _serial_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str, text: str
) -> list[str]:
    """What stderr says of a ``parallel func`` that runs on one thread (no OpenMP in its C)."""
    path = _spec(tmp_path, text)
    code, err, out = _run(capsys, "--target", target_name, "--no-db", "--threads", "2", path)
    assert code == 0
    assert "#pragma omp" not in out
    return [line.replace(str(path), "PATH") for line in err]


@pytest.mark.target("zen1")  # its fork/join cost keeps a 2x2x2 product on one thread
def test_parallel_func_that_stays_serial_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    assert _serial_warning(tmp_path, capsys, target_name, TINY) == [
        "PATH:1:1: warning: parallel func f runs on one thread: no parallel loop is cheaper "
        "than the serial code at this size"
    ]


def test_parallel_func_of_a_scalar_says_why_it_stays_serial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    text = "parallel func f(x: f32[65536]) -> y: f32[] {\n    y = sum(x)\n}\n"
    assert _serial_warning(tmp_path, capsys, target_name, text) == [
        "PATH:1:1: warning: parallel func f runs on one thread: its result has one element, "
        "and a parallel loop splits the result, not a reduction"
    ]


@pytest.mark.target("zen1")
@pytest.mark.runs_code
def test_parallel_func_runs_on_threads_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str, processors: int
) -> None:
    path = _spec(tmp_path, LARGE)
    code, err, out = _run(
        capsys, "--target", target_name, "--no-db", "--threads", "2", "--check", path
    )
    assert code == 0, err
    assert "#pragma omp parallel for num_threads(2) schedule(static)" in out
    assert err[-1].startswith("check passed: g matches NumPy")
    assert not any("warning" in line for line in err)


def test_help_documents_threads(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["bench", "--help"]):
        assert main(argv) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "--threads N most threads a parallel loop of a 'parallel func' may run on" in out


def test_bench_text_says_threads_and_more_threads_than_cpus() -> None:
    row = {
        "spec": "x.lark:f",
        "gflops": 1.0,
        "gbps": 1.0,
        "seconds": 1e-3,
        "seconds_low": 1e-3,
        "seconds_high": 1e-3,
        "synthesis_seconds": 1.0,
        "peers": {},
        "peers_missing": {},
        "ratios": {},
        "best_peer": None,
        "ratio": None,
        "bound": "compute",
        "fraction_of_limit": 0.5,
        "peak_gflops": 2.0,
        "read_gbps": 1.0,
        "read_gbps_footprint": 1.0,
    }
    cpus = os.cpu_count() or 1
    one = _bench_text({**row, "threads_used": 1})
    assert "threads" not in one
    many = _bench_text({**row, "threads_used": cpus + 1}).splitlines()
    assert many[0].endswith(f"synthesis 1.0 s, on {cpus + 1} threads")
    assert many[1] == (
        f"  note: the code runs on {cpus + 1} threads, this machine has {cpus} CPUs (see --threads)"
    )
