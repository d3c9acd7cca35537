"""``benchmark_script(name)``: a script of ``benchmarks/`` loaded as a module.

``benchmarks/`` is a folder of scripts, not a package, so each is loaded by path.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def benchmark_script() -> Callable[[str], ModuleType]:
    """Load ``benchmarks/<name>.py`` by path."""
    return _load
