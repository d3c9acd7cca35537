"""The hand-written register-fused dense layer behind BENCHMARKS.md's dense_relu note
computes relu(x @ w + b)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
@pytest.mark.runs_code
def test_fused_matches_numpy(tmp_path: Path, benchmark_script: Callable[[str], ModuleType]) -> None:
    script = benchmark_script("fused_dense_relu")
    fused = script.compile_c(script.SOURCE, "fused", tmp_path)
    x, w, b, y = script.operands(seed=1)
    assert script.relative_error(fused, x, w, b, y) < 1e-5  # y starts as NaN
    assert 0.3 < float((y > 0).mean()) < 0.7  # ReLU cut about half of the outputs
