"""``benchmarks/first_pass_repeat.py``: fidelity's two first passes, twice each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

SPEC = "func f(a: f32[8, 16], b: f32[16, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n"


@pytest.mark.runs_code
@pytest.mark.times_code
@pytest.mark.target("zen1")
def test_both_passes_are_timed_twice_and_compared(
    benchmark_script: Callable[[str], ModuleType],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    script = benchmark_script("first_pass_repeat")
    assert script.main([str(spec), "--top", "3", "--rounds", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:4]] == ["batches", "paired"] * 2
    assert out[4].startswith("batches: the two runs agree with tau")
    assert out[5].startswith("paired: the two runs agree with tau")
    rows = [line.split() for line in out[7:]]
    assert 2 <= len(rows) <= 3
    assert rows[0][1:] == ["1.000"] * 5  # the chosen program, over itself
    assert all(float(x) > 0 for row in rows for x in row[2:])
