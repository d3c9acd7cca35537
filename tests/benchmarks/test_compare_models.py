"""``benchmarks/compare_models.py``: two cost models judged on one pool of timed programs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from morello.context import SynthesisContext

SPEC = "func f(a: f32[8, 16], b: f32[16, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n"


@pytest.fixture
def cm(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("compare_models")


def test_overrides_replace_fields_and_refuse_unknown_ones(
    cm: ModuleType, ctx: SynthesisContext
) -> None:
    other = cm.overridden(ctx, {"fork_join": 7})
    assert other.coefficients.fork_join == 7 and other.target == ctx.target
    with pytest.raises(ValueError, match="unknown coefficient field"):
        cm.overridden(ctx, {"bogus": 1})
    with pytest.raises(ValueError, match="neither a named coefficient nor a level"):
        cm.overridden(ctx, {"resources": {"fp": {"nothing": 1}}})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [("[1]", "not a JSON object"), ('{"bogus": 1}', "unknown coefficient field")],
)
def test_bad_overrides_are_one_line_errors(
    cm: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    overrides: str,
    message: str,
) -> None:
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    bad = tmp_path / "o.json"
    bad.write_text(overrides, encoding="utf-8")
    assert cm.main([str(spec), str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.runs_code
@pytest.mark.target("zen1")
def test_both_models_judged_on_one_pool(
    cm: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    overrides = tmp_path / "o.json"
    overrides.write_text(json.dumps({"level_hit": {"GL": 200, "L1": 2, "VRF": 0, "RF": 0}}))
    code = cm.main([str(spec), str(overrides), "--top", "3", "--rounds", "1", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert 3 <= report["programs"] <= 6
    assert report["placement_tau"] is None or -1.0 <= report["placement_tau"] <= 1.0
    for model in ("A", "B"):
        r = report[model]
        assert r["chosen_us"] >= r["fastest_us"] > 0
        assert r["chosen_over_fastest"] >= 1.0
