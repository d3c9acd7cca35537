"""``benchmarks/rerank.py``: a fidelity report's programs ranked again under other coefficients."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from morello.context import make_context

SPEC = "func f(a: f32[8, 16], b: f32[16, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n"


@pytest.fixture
def report(tmp_path: Path, fidelity_reports: Callable[..., list[dict[str, Any]]]) -> Path:
    """A report as ``fidelity --json`` writes it, its times the predicted costs (tau 1),
    made and read under zen1's defaults."""
    (report,) = fidelity_reports(tmp_path, {"f": SPEC}, lambda n, cost: cost * 1e-9)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


@pytest.mark.target("zen1")
def test_the_report_ranked_again_and_under_a_grid(
    benchmark_script: Callable[[str], ModuleType],
    report: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    overrides = tmp_path / "flat.json"
    flat = {**make_context("zen1").coefficients.named, "fma": 0, "vector_load": 0}
    overrides.write_text(json.dumps({"named": flat}), encoding="utf-8")
    rerank = benchmark_script("rerank")
    assert rerank.main([str(report), "--overrides", str(overrides), "--grid"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "model | mean tau | f"
    assert lines[1] == "in use | 1.000 | 1.00"  # the report's times are its costs
    assert lines[2].startswith("flat | ")
    assert any(line.startswith("fma x0.5 | ") for line in lines)
    assert any(line.startswith("level_hit.GL x2.0 | ") for line in lines)
    assert len(lines) > 20


@pytest.mark.target("zen1")
def test_a_report_of_other_coefficients_is_refused(
    benchmark_script: Callable[[str], ModuleType], report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(report.read_text())
    data["programs"][1]["cost"] += 1
    report.write_text(json.dumps(data), encoding="utf-8")
    assert benchmark_script("rerank").main([str(report)]) == 2
    err = capsys.readouterr().err
    assert "cost otherwise than the report's" in err and err.count("\n") == 1


@pytest.fixture
def report_with_trees(
    tmp_path: Path, fidelity_reports: Callable[..., list[dict[str, Any]]]
) -> Path:
    """The report, each program carrying its tree as ``fidelity --trees`` writes it, and its
    costs no longer those of the model in use (as after a change to the model)."""
    (report,) = fidelity_reports(tmp_path, {"f": SPEC}, lambda n, cost: cost * 1e-9, trees=True)
    for p in report["programs"]:
        p["cost"] += 7
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


@pytest.mark.target("zen1")
def test_trees_are_replayed_under_the_model_in_use(
    benchmark_script: Callable[[str], ModuleType],
    report_with_trees: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rerank = benchmark_script("rerank")
    gz = report_with_trees.with_suffix(".json.gz")
    with gzip.open(gz, "wt", encoding="utf-8") as f:  # as benchmarks/fidelity.py --trees
        f.write(report_with_trees.read_text())
    for path in (report_with_trees, gz):
        assert rerank.main([str(path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1] == "in use | 1.000 | 1.00"  # the replayed costs, not the report's
    ctx = make_context("zen1")
    data = json.loads(report_with_trees.read_text())
    ((_, impls, _),) = rerank.load_lists([data], ctx)
    assert [i.cost for i in impls] == [p["cost"] - 7 for p in data["programs"]]
    assert all(len(i.walk()) > 3 for i in impls)


@pytest.mark.target("zen1")
def test_a_tree_that_does_not_replay_is_refused(
    benchmark_script: Callable[[str], ModuleType],
    report_with_trees: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = json.loads(report_with_trees.read_text())
    data["programs"][1]["impl"] = data["programs"][1]["impl"].replace("tile_out:", "tile_in:", 1)
    report_with_trees.write_text(json.dumps(data), encoding="utf-8")
    assert benchmark_script("rerank").main([str(report_with_trees)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rerank: f: no action at ") and err.count("\n") == 1


@pytest.mark.target("zen1")
def test_trees_replay_under_a_target_with_a_whole_spec_cache(
    benchmark_script: Callable[[str], ModuleType], report_with_trees: Path
) -> None:
    # zen1's trees under zen1 with an L2 that holds the whole product: each replayed tree
    # starts with the forced residency, and below it is the tree as timed.
    from zen1_l2 import Zen1L2

    from morello.cli import format_impl
    from morello.nodes import ResideAction
    from morello.plugins import Plugins

    rerank = benchmark_script("rerank")
    data = json.loads(report_with_trees.read_text())
    l2ctx = make_context("zen1_l2", Plugins(modules=[Zen1L2()]), [], None)
    spec = rerank.report_program(data, l2ctx).spec
    for p in data["programs"]:
        impl = rerank.replay(p["impl"], spec, l2ctx)
        assert isinstance(impl.action, ResideAction)
        (body,) = impl.children
        assert _lines(format_impl(body, l2ctx)) == _lines(p["impl"])
    # Without the cache the same trees replay with no residency.
    zen1 = make_context("zen1")
    plain = rerank.replay(data["programs"][0]["impl"], rerank.report_program(data, zen1).spec, zen1)
    assert not any(isinstance(i.action, ResideAction) for i in plain.walk())


def _lines(tree: str) -> list[str]:
    """A tree's lines without the figures ``format_impl`` puts after each action."""
    return [line.split("  | ")[0] for line in tree.splitlines()]
