"""``benchmarks/asm_twins.py``: a report's programs grouped by the instructions they compile to."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SPEC = "func f(a: f32[4, 16], b: f32[16, 16]) -> c: f32[4, 16] { c = matmul(a, b) }\n"


@pytest.mark.target("zen1")
def test_assembly_key_ignores_names_and_layout_but_not_instructions(
    benchmark_script: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    from morello.context import make_context

    twins = benchmark_script("asm_twins")
    target = make_context("zen1").target
    one = "int f(int *restrict a) { int s = 0; for (int i = 0; i < 64; i++) s += a[i]; return s; }"
    spaced = one.replace("; ", ";\n    ").replace("s ", "total ").replace("s;", "total;")
    other = one.replace("s += a[i]", "s ^= a[i]")
    keys = [twins.assembly_key(c, target, tmp_path) for c in (one, spaced, other)]
    assert keys[0] == keys[1] != keys[2]


@pytest.mark.runs_code
@pytest.mark.target("zen1")
def test_a_program_listed_twice_is_one_assembly(
    benchmark_script: Callable[[str], ModuleType],
    fidelity_reports: Callable[..., list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (report,) = fidelity_reports(tmp_path, {"f": SPEC}, lambda n, c: 1e-6, top=3, trees=True)
    first = dict(report["programs"][0], seconds=1.1e-6)
    report["programs"].append(first)  # the same tree again, timed 10% slower
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    assert benchmark_script("asm_twins").main([str(path), "--show", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("spec | programs | assemblies | groups priced apart")
    name, programs, assemblies, apart, _, time_ratio = lines[1].split(" | ")
    assert (name, programs, time_ratio) == ("f", "4", "1.100")
    assert int(assemblies) <= 3
    # (the three cheapest programs of this small product include two that compile alike
    # but are priced apart: ``--show`` prints them)
    shown = [line for line in lines if line.endswith("compile alike")]
    assert len(shown) == min(1, int(apart))


@pytest.mark.target("zen1")
def test_a_report_without_trees_is_refused(
    benchmark_script: Callable[[str], ModuleType],
    fidelity_reports: Callable[..., list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reports = fidelity_reports(tmp_path, {"f": SPEC}, lambda n, c: 1e-6, top=2)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(reports), encoding="utf-8")
    assert benchmark_script("asm_twins").main([str(path)]) == 2
    assert "f has no trees (fidelity --trees)" in capsys.readouterr().err
