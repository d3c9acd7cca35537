"""The read-bandwidth yardstick compiles, runs and reports sane figures."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found")
@pytest.mark.requires_isa("avx2")
def test_read_bandwidth_measure_gives_ordered_positive_figures(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    result = benchmark_script("read_bandwidth").measure(size_mib=16, repeats=3)
    assert result["size_mib"] == 16
    assert result["repeats"] == 3
    figures = [result[k] for k in ("gbps_min", "gbps_median", "gbps_max")]
    assert all(math.isfinite(g) and g > 0 for g in figures), result
    assert figures == sorted(figures), result
    streams = result["gbps_streams_median"]
    assert sorted(streams) == [2, 4, 8], result
    assert all(math.isfinite(g) and g > 0 for g in streams.values()), result
    assert result["gbps_best_median"] == max(result["gbps_median"], *streams.values())
