"""The hand-written matvec nests behind BENCHMARKS.md's matvec note compute x @ w."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "matvec_nests.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("matvec_nests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
@pytest.mark.requires_isa("avx2", "fma")
def test_every_nest_matches_numpy(tmp_path: Path) -> None:
    script = _load_script()
    fns = script.build_nests(tmp_path)
    assert set(fns) == set(script.NESTS)
    x, w, y = script.operands(seed=1)
    for name, fn in fns.items():
        assert script.relative_error(fn, x, w, y) < 1e-5, name
