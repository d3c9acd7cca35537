"""``morello calibrate``: a small training set timed and fitted, and the command line.

The real training set takes minutes; these tests swap in two small functions.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from morello import calibration
from morello.cli import main
from morello.codegen import calibrate as calibrate_mod
from morello.codegen import fidelity as fidelity_mod
from morello.codegen.c import lower_function
from morello.codegen.fidelity import cheapest_programs
from morello.context import SynthesisContext
from morello.errors import ExitCode
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.search.solve import synthesize

_SMALL = (
    calibrate_mod._mm(8, 8, 16),
    "func relu_16x64(x: f32[16, 64]) -> y: f32[16, 64] {\n    y = relu(x)\n}\n",
)


def _programs(ctx: SynthesisContext) -> list[Program]:
    return [build_program(parse_spec_file("t.lark", text).funcs[0], ctx) for text in _SMALL]


def test_training_set_builds_on_the_target(ctx: SynthesisContext) -> None:
    programs = calibrate_mod.training_programs(ctx)
    names = [p.name for p in programs]
    assert len(names) == len(set(names))
    assert "mm_64x64x64_f32" in names  # every target has f32 products


@pytest.mark.runs_code
@pytest.mark.times_code
@pytest.mark.target("zen1")
def test_calibrate_fits_resource_prices(
    ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibrate_mod, "TRAINING", _SMALL)
    resources = {"fp": {"fma": 3, "vector_op": 3}, "load": {"L1": 3}, "store": {"vector_store": 6}}
    ports = attrs.evolve(ctx.coefficients, resources=resources)
    report = calibrate_mod.calibrate(
        attrs.evolve(ctx, coefficients=ports), {}, per_function=3, rounds=1, min_batch_s=0.002
    )
    assert "resources.fp.fma" in report["names"] and "named.fma" not in report["names"]
    fitted = report["coefficients"].resources
    assert set(fitted) == {"fp", "load", "store"} and fitted["fp"]["fma"] > 0
    # The prices are in picoseconds now, like the other coefficients.
    assert fitted["fp"]["fma"] > 3


@pytest.mark.runs_code
@pytest.mark.times_code
def test_calibrate_fits_a_small_set(ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate_mod, "TRAINING", _SMALL)
    compiled: list[Path] = []
    compile_shared = fidelity_mod.compile_shared

    def counting(*args: object, **kwargs: object) -> Path:
        compiled.append(compile_shared(*args, **kwargs))
        return compiled[-1]

    monkeypatch.setattr(fidelity_mod, "compile_shared", counting)
    report = calibrate_mod.calibrate(ctx, {}, per_function=3, rounds=2, min_batch_s=0.002)
    # Each function's programs are compiled (and checked) once for all the rounds, and once
    # more where the refinement timed new ones.
    refined = {d["function"] for d in report["detail"] if d["refinement"] > 0}
    assert len(compiled) == report["functions"] + len(refined)
    assert report["functions"] == 2
    assert report["programs"] == len(report["detail"]) >= 2
    assert report["after"]["median_rel_error"] >= 0
    coeffs = report["coefficients"]
    assert set(coeffs.level_hit) == set(ctx.coefficients.level_hit)
    assert all(d["seconds"] > 0 for d in report["detail"])
    # Each program is fitted by its fastest round; the rounds are in the report.
    for d in report["detail"]:
        assert len(d["rounds"]) == 2
        assert d["seconds"] == min(d["rounds"])
        # Each round's fastest batch is no slower than its median batch (refinement's
        # programs: both scaled, by different factors, so only the count is checked).
        assert len(d["round_lows"]) == 2
        if d["refinement"] == 0:
            assert all(lo <= t for lo, t in zip(d["round_lows"], d["rounds"], strict=True))
    # The refinement's programs, if the fit chose any not timed, are marked and counted.
    assert report["refined"] == sum(d["refinement"] > 0 for d in report["detail"])
    # How much the machine moved between the rounds, from the rounds in the report.
    spread = calibrate_mod.round_spread([d["rounds"] for d in report["detail"]])
    assert report["round_spread"] == spread >= 0
    for key in ("before", "after"):
        assert report[key]["chosen_over_fastest"] >= 1.0


@pytest.mark.runs_code
@pytest.mark.times_code
def test_refinement_times_what_the_fit_would_choose(ctx: SynthesisContext) -> None:
    (program,) = [p for p in _programs(ctx) if p.name.startswith("mm_")]
    memo: dict = {}
    synthesize(program.spec, ctx, memo)
    top = calibrate_mod.REFINE_TOP
    impls = cheapest_programs(program, ctx, memo, top, spacing=0.02)
    pools = [(program, impls)]
    samples = [[[1e-6, 2e-6] for _ in impls]]  # two rounds each, as the first timing left them
    lows = [[[0.9e-6, 1.8e-6] for _ in impls]]  # and each round's fastest batch
    passes = [[0] * len(impls)]
    # Nothing new under the coefficients the pool was chosen with.
    assert (
        calibrate_mod._refine(
            pools, samples, lows, passes, 1, ctx, ctx.coefficients, 2, 0.002, print
        )
        == 0
    )
    # Coefficients under which the L1 is dear choose other programs than the chosen one
    # alone. (The whole pool can hold all three they choose: on spr it does, since a
    # residency inside a loop costs what it costs above, ``cost.loop_fills``.)
    dear = attrs.evolve(
        ctx.coefficients,
        level_hit={**ctx.coefficients.level_hit, "L1": 1000 * ctx.coefficients.level_hit["GL"]},
    )
    for kept in (impls, samples[0], lows[0], passes[0]):
        del kept[1:]
    first = len(impls)
    added = calibrate_mod._refine(pools, samples, lows, passes, 1, ctx, dear, 2, 0.002, print)
    assert 1 <= added <= top
    assert len(pools[0][1]) == len(samples[0]) == len(lows[0]) == len(passes[0]) == first + added
    assert passes[0] == [0] * first + [1] * added
    texts = {lower_function(impl, program, ctx)[0] for impl in pools[0][1]}
    assert len(texts) == first + added  # only programs not timed before
    for rounds, round_lows in zip(samples[0][first:], lows[0][first:], strict=True):
        assert len(rounds) == len(round_lows) == 2 and all(t > 0 for t in rounds + round_lows)


@pytest.mark.runs_code
@pytest.mark.times_code
def test_cli_calibrate_writes_the_file_that_show_reads(
    target_name: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("MORELLO_CALIBRATION", raising=False)
    monkeypatch.setattr(calibrate_mod, "TRAINING", _SMALL)
    code = main(["calibrate", "-t", target_name, "--no-db", "--rounds", "1",
                 "--per-function", "2", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err
    doc = json.loads(out)
    path = calibration.calibration_path(target_name)
    assert doc["written"] == str(path)
    assert path.is_file()
    code = main(["calibrate", "-t", target_name, "--show", "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == ExitCode.OK
    assert shown["calibrated"] is True
    assert shown["source"] == str(path)
    assert shown["coefficients"] == doc["coefficients"]


def test_round_spread() -> None:
    # Each program's slowest round over its fastest, less 1; the median over the programs.
    assert calibrate_mod.round_spread([[1.0, 1.2], [2.0, 2.1, 2.0], [4.0, 4.2]]) == pytest.approx(
        0.05
    )
    assert calibrate_mod.round_spread([[1.0], [2.0]]) == 0.0  # one round: nothing to compare
    assert calibrate_mod.round_spread([]) == 0.0


@pytest.mark.runs_code
@pytest.mark.times_code
@pytest.mark.target("zen1")
def test_cli_calibrate_says_how_busy_the_machine_was(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(calibrate_mod, "TRAINING", _SMALL[:1])
    monkeypatch.setattr(calibrate_mod, "BUSY_SPREAD", -1.0)  # any spread counts as busy
    code = main(["calibrate", "-t", "zen1", "--no-db", "--rounds", "2",
                 "--per-function", "2", "--dry-run"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err
    line = next(s for s in out.splitlines() if "slowest round was" in s)
    assert "slower than its fastest (median): the machine was busy" in line
    assert "not written (--dry-run)" in out


def test_cli_calibrate_show_defaults(
    target_name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MORELLO_CALIBRATION", raising=False)
    code = main(["calibrate", "-t", target_name, "--show"])
    out, _ = capsys.readouterr()
    assert code == ExitCode.OK
    lines = out.splitlines()
    assert lines[0] == f"coefficients of {target_name} from the defaults of target {target_name}:"
    assert any(line.split()[0] == "level_hit" for line in lines[1:])
