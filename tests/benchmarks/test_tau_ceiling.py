"""``benchmarks/tau_ceiling.py``: coefficients fitted to a fidelity report's own times."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SPECS = {
    "f": "func f(a: f32[8, 16], b: f32[16, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n",
    "g": "func g(a: f32[4, 32], b: f32[32, 8]) -> c: f32[4, 8] { c = matmul(a, b) }\n",
}


@pytest.fixture
def write_report(
    tmp_path: Path, fidelity_reports: Callable[..., list[dict[str, Any]]]
) -> Callable[[list[str], Callable[[int, int], float]], Path]:
    """``write_report(names, times)``: a report list as ``benchmarks/fidelity.py`` writes it,
    for the functions ``names`` (6 programs each); program ``n`` of cost ``c`` measured at
    ``times(n, c)`` seconds (zen1's defaults)."""

    def write(names: list[str], times: Callable[[int, int], float]) -> Path:
        reports = fidelity_reports(tmp_path, {n: SPECS[n] for n in names}, times, top=6)
        path = tmp_path / "report.json"
        path.write_text(json.dumps(reports), encoding="utf-8")
        return path

    return write


@pytest.mark.target("zen1")
def test_times_the_model_predicts_are_fitted_in_and_out_of_sample(
    benchmark_script: Callable[[str], ModuleType],
    write_report: Callable[[list[str], Callable[[int, int], float]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = write_report(["f", "g"], lambda n, cost: cost * 1e-9)
    assert benchmark_script("tau_ceiling").main([str(report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "coefficients | mean tau | f | g"
    assert lines[1] == "in use | 1.000 | 1.00 | 1.00"
    label, mean, *_ = lines[2].split(" | ")
    assert label == "fitted to all (in sample)" and float(mean) > 0.9
    assert lines[3].startswith("fitted to the others (left out) | ")
    assert lines[4].startswith("in-sample fit: level_hit.GL ")


@pytest.mark.target("zen1")
def test_times_against_the_model_rank_badly_whatever_the_fit(
    benchmark_script: Callable[[str], ModuleType],
    write_report: Callable[[list[str], Callable[[int, int], float]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Times in the opposite order of rank: no coefficients can rank them (tau below 0 in use;
    fitted, the least squares still cannot turn the order over everywhere)."""
    report = write_report(["f"], lambda n, cost: (10 - n) * 1e-6)
    assert benchmark_script("tau_ceiling").main([str(report), "f"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "in use | -1.000 | -1.00"
    assert float(lines[2].split(" | ")[1]) < 1.0
    assert not any(line.startswith("fitted to the others") for line in lines)  # one spec


@pytest.mark.target("zen1")
def test_a_report_of_another_model_is_refused(
    benchmark_script: Callable[[str], ModuleType],
    write_report: Callable[[list[str], Callable[[int, int], float]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = write_report(["f"], lambda n, cost: cost * 1e-9)
    data = json.loads(report.read_text())
    data[0]["programs"][2]["cost"] += 1
    report.write_text(json.dumps(data), encoding="utf-8")
    assert benchmark_script("tau_ceiling").main([str(report)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tau_ceiling: f: the programs built again cost otherwise")
