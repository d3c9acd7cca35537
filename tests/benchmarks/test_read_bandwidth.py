"""The read-bandwidth yardstick compiles, runs and reports sane figures.

``benchmarks/`` is a folder of scripts, not a package, so the module is loaded by path.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "read_bandwidth.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("read_bandwidth", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
@pytest.mark.requires_isa("avx2")
def test_read_bandwidth_measure_gives_ordered_positive_figures() -> None:
    result = _load_script().measure(size_mib=16, repeats=3)
    assert result["size_mib"] == 16
    assert result["repeats"] == 3
    figures = [result[k] for k in ("gbps_min", "gbps_median", "gbps_max")]
    assert all(math.isfinite(g) and g > 0 for g in figures), result
    assert figures == sorted(figures), result
    streams = result["gbps_streams_median"]
    assert sorted(streams) == [2, 4, 8], result
    assert all(math.isfinite(g) and g > 0 for g in streams.values()), result
    assert result["gbps_best_median"] == max(result["gbps_median"], *streams.values())
