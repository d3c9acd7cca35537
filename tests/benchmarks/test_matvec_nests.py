"""The hand-written matvec nests behind BENCHMARKS.md's matvec note compute x @ w."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
@pytest.mark.runs_code
def test_every_nest_matches_numpy(
    tmp_path: Path, benchmark_script: Callable[[str], ModuleType]
) -> None:
    script = benchmark_script("matvec_nests")
    fns = script.build_nests(tmp_path)
    assert set(fns) == set(script.NESTS)
    x, w, y = script.operands(seed=1)
    for name, fn in fns.items():
        assert script.relative_error(fn, x, w, y) < 1e-5, name
