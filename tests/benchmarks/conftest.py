"""``benchmark_script(name)``: a script of ``benchmarks/`` loaded as a module;
``fidelity_reports``: reports as ``morello fidelity --json`` writes them, for the scripts
that read them.

``benchmarks/`` is a folder of scripts, not a package, so each is loaded by path.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

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


def _reports(
    tmp_path: Path,
    specs: Mapping[str, str],
    times: Callable[[int, int], float],
    top: int = 4,
    trees: bool = False,
) -> list[dict[str, Any]]:
    from morello.cli import format_impl
    from morello.codegen.fidelity import cheapest_programs
    from morello.context import make_context
    from morello.lang.spec_file import build_program, parse_spec_file

    ctx = make_context("zen1")
    reports = []
    for name, text in specs.items():
        spec = tmp_path / f"{name}.lark"
        spec.write_text(text, encoding="utf-8")
        (func,) = parse_spec_file(str(spec), text).funcs
        impls = cheapest_programs(build_program(func, ctx), ctx, {}, top, 0.01)
        programs = [
            {
                "rank": n,
                "cost": i.cost,
                "seconds": times(n, i.cost),
                **({"impl": format_impl(i, ctx)} if trees else {}),
            }
            for n, i in enumerate(impls)
        ]
        reports.append(
            {"spec": f"{spec}:{name}", "function": name, "spacing": 0.01, "programs": programs}
        )
    return reports


@pytest.fixture
def fidelity_reports(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[dict[str, Any]]]:
    """``fidelity_reports(tmp_path, {name: spec text}, times, top=4, trees=False)``: one report
    per function, as ``fidelity --json`` (``--trees``) writes it, of its ``top`` cheapest
    programs under zen1's defaults (``MORELLO_CALIBRATION=off`` for the test), program ``n``
    of cost ``c`` measured at ``times(n, c)`` seconds."""
    monkeypatch.setenv("MORELLO_CALIBRATION", "off")
    return _reports
