"""Calibration: the file of fitted coefficients, the plugin that serves it, features and the fit.

* ``save``/``load`` round-trip the coefficients through a JSON file per machine and target;
  a damaged file is a one-line ``TargetError`` naming it; ``MORELLO_CALIBRATION=off`` and a
  missing file give None, and the plugin then leaves the target's defaults.
* ``tree_cost`` recosts an Impl as the search did; ``features`` are the cost's slopes in the
  parameters, and the model is homogeneous: values times features add up to the cost.
* ``fit`` recovers known coefficients from synthetic times and clamps negative ones to 0.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import attrs
import numpy as np
import pytest
import toy_target

from morello import calibration
from morello.context import SynthesisContext
from morello.db.sqlite import fingerprint
from morello.errors import TargetError
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.plugins import Plugins
from morello.search.solve import synthesize
from morello.target import CostCoefficients

COEFFS = CostCoefficients(
    level_hit={"DRAM": 8000, "SRAM": 700, "REG": 0},
    named={"mac": 400, "scalar_op": 300, "spare": 0},
    stream_hit={"DRAM": (8000, 6000, 5000)},
    stream_lines=16,
    stream_reuse=4,
    chain_latency={"REG": 1200},
    stream_restart={"DRAM": 90_000},
    stream_burst={"DRAM": 16},
    fork_join=2_000_000,
)


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``XDG_CONFIG_HOME`` with calibration on."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(calibration.ENV_VAR, raising=False)
    return tmp_path


# --- Paths ------------------------------------------------------------------------------------


def test_config_dir_follows_xdg_or_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert calibration.config_dir() == tmp_path / "morello"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert calibration.config_dir() == tmp_path / "home" / ".config" / "morello"


@pytest.mark.parametrize(
    ("model", "slug"),
    [
        ("Intel(R) Xeon(R) Platinum 8480+", "intel-xeon-platinum-8480"),
        ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "intel-core-i7-8700"),
        ("AMD Ryzen 7 1700 Eight-Core Processor", "amd-ryzen-7-1700-eight-core"),
        ("???", "unknown-cpu"),
    ],
)
def test_machine_name_is_host_and_cpu_slug(
    monkeypatch: pytest.MonkeyPatch, model: str, slug: str
) -> None:
    monkeypatch.setattr(calibration, "_host_name", lambda: "MyHost.example.com")
    monkeypatch.setattr(calibration, "cpu_model", lambda: model)
    assert calibration.machine_name() == f"myhost-{slug}"


def test_machine_name_of_this_machine_is_filesystem_safe() -> None:
    name = calibration.machine_name()
    assert name and all(c.isalnum() or c == "-" for c in name)
    assert name == calibration.machine_name()


def test_calibration_path(config_home: Path) -> None:
    path = calibration.calibration_path("toy")
    assert path == config_home / "morello" / "calibration" / calibration.machine_name() / "toy.json"


# --- The file ---------------------------------------------------------------------------------


def test_save_load_round_trip(config_home: Path) -> None:
    assert calibration.load("toy") is None
    path = calibration.save("toy", COEFFS, {"median_rel_error": 0.05})
    assert path == calibration.calibration_path("toy")
    assert calibration.load("toy") == COEFFS
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["format"] == 1
    assert doc["target"] == "toy"
    assert doc["machine"] == calibration.machine_name()
    assert doc["cpu"] == calibration.cpu_model()
    assert doc["units"] == "ps"
    assert doc["created"]
    assert doc["info"] == {"median_rel_error": 0.05}
    assert doc["coefficients"]["stream_hit"] == {"DRAM": [8000, 6000, 5000]}
    assert doc["coefficients"]["fork_join"] == 2_000_000
    assert doc["coefficients"]["stream_reuse"] == 4
    assert [p.name for p in path.parent.iterdir()] == ["toy.json"]  # no temporary file left


def test_resources_round_trip(config_home: Path) -> None:
    coeffs = attrs.evolve(COEFFS, resources={"fp": {"mac": 400, "SRAM": 0}, "st": {"scalar_op": 1}})
    path = calibration.save("toy", coeffs, {})
    assert calibration.load("toy") == coeffs
    doc = json.loads(path.read_text(encoding="utf-8"))
    saved = doc["coefficients"]["resources"]
    assert saved == {"fp": {"SRAM": 0, "mac": 400}, "st": {"scalar_op": 1}}


def _write(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")


def _saved_doc() -> dict:  # type: ignore[type-arg]
    path = calibration.save("toy", COEFFS, {})
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: "{ not json", "Expecting property name"),
        (lambda d: [1, 2], "not a JSON object"),
        (lambda d: {**d, "format": 2}, "format 2, expected 1"),
        (lambda d: {**d, "target": "other"}, "made for target 'other'"),
        (lambda d: {**d, "coefficients": {**d["coefficients"], "bogus": 1}}, "bogus"),
        (
            lambda d: {**d, "coefficients": {**d["coefficients"], "level_hit": {"DRAM": 1.5}}},
            r"level_hit.DRAM is 1.5",
        ),
        (lambda d: {**d, "coefficients": {"named": {}}}, "missing coefficient field"),
        (
            lambda d: {**d, "coefficients": {**d["coefficients"], "stream_reuse": 0}},
            "stream_reuse must be at least 1",
        ),
        (
            lambda d: {**d, "coefficients": {**d["coefficients"], "resources": {"fp": 1}}},
            "resources is not an object of objects",
        ),
        (
            lambda d: {
                **d,
                "coefficients": {**d["coefficients"], "resources": {"fp": {"fmaa": 1}}},
            },
            "prices 'fmaa', which is neither",
        ),
    ],
)
def test_damaged_file_is_a_one_line_error_naming_it(
    config_home: Path, change: object, reason: str
) -> None:
    doc = _saved_doc()
    path = calibration.calibration_path("toy")
    _write(path, change(doc))  # type: ignore[operator]
    with pytest.raises(TargetError, match=reason) as info:
        calibration.load("toy")
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert "python -m morello calibrate --target toy" in message
    assert "delete the file" in message


def test_calibration_off_ignores_the_file(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calibration.save("toy", COEFFS, {})
    monkeypatch.setenv(calibration.ENV_VAR, "off")
    assert calibration.load("toy") is None
    _write(calibration.calibration_path("toy"), "damaged")
    assert calibration.load("toy") is None  # not even read


@pytest.mark.parametrize("value", ["on", " ON ", ""])
def test_calibration_on_or_unset_reads_the_file(
    config_home: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    calibration.save("toy", COEFFS, {})
    monkeypatch.setenv(calibration.ENV_VAR, value)
    assert calibration.load("toy") == COEFFS


def test_calibration_switch_misspelt_is_an_error(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "of" used to mean on, silently.
    calibration.save("toy", COEFFS, {})
    monkeypatch.setenv(calibration.ENV_VAR, "of")
    with pytest.raises(TargetError, match="MORELLO_CALIBRATION must be 'on' or 'off'"):
        calibration.load("toy")


# --- The plugin -------------------------------------------------------------------------------


def test_plugin_serves_the_saved_coefficients(config_home: Path) -> None:
    plugins = Plugins(modules=[toy_target], entry_points=False)
    defaults = plugins.cost_coefficients(toy_target.TOY)
    assert defaults.level_hit == {"DRAM": 10, "REG": 0, "SRAM": 1}
    calibration.save("toy", COEFFS, {})
    assert plugins.cost_coefficients(toy_target.TOY) == COEFFS
    blocked = Plugins(modules=[toy_target], entry_points=False, block=["morello.calibration"])
    assert blocked.cost_coefficients(toy_target.TOY) == defaults


def test_plugin_passes_on_other_targets_files(config_home: Path) -> None:
    calibration.save("other", COEFFS, {})
    plugins = Plugins(modules=[toy_target], entry_points=False)
    assert plugins.cost_coefficients(toy_target.TOY).named == {"mac": 1, "scalar_op": 1}


def test_memo_namespace_changes_with_coefficients(ctx: SynthesisContext) -> None:
    other = attrs.evolve(ctx, coefficients=attrs.evolve(ctx.coefficients, fork_join=12345))
    assert fingerprint(other) != fingerprint(ctx)
    assert fingerprint(attrs.evolve(ctx)) == fingerprint(ctx)
    name = next(iter(ctx.coefficients.named))
    ports = attrs.evolve(ctx.coefficients, resources={"fp": {name: 1}})
    assert fingerprint(attrs.evolve(ctx, coefficients=ports)) != fingerprint(ctx)


# --- Parameters -------------------------------------------------------------------------------


def test_parameters_are_the_nonzero_entries_and_stream_scales() -> None:
    assert calibration.parameters(COEFFS) == [
        "level_hit.DRAM",
        "level_hit.SRAM",
        "named.mac",
        "named.scalar_op",
        "chain_latency.REG",
        "stream_restart.DRAM",
        "stream_hit.DRAM",
    ]
    assert calibration.get_param(COEFFS, "stream_hit.DRAM") == 8000.0
    assert calibration.get_param(COEFFS, "named.mac") == 400.0
    with pytest.raises(KeyError):
        calibration.get_param(COEFFS, "fork_join")


def test_names_a_resource_prices_are_not_parameters() -> None:
    coeffs = attrs.evolve(COEFFS, resources={"fp": {"mac": 1, "SRAM": 1, "scalar_op": 0}})
    names = calibration.parameters(coeffs)
    assert "named.mac" not in names and "named.scalar_op" not in names
    assert "level_hit.SRAM" in names
    assert names[-2:] == ["resources.fp.SRAM", "resources.fp.mac"]


def test_with_params_rounds_scales_and_keeps_levels_defined() -> None:
    new = calibration.with_params(
        COEFFS,
        {
            "stream_hit.DRAM": 4000.4,
            "named.mac": 0.3,
            "named.scalar_op": 0.0,
            "level_hit.SRAM": 0.0,
            "chain_latency.REG": 2.6,
        },
    )
    assert new.stream_hit == {"DRAM": (4000, 3000, 2500)}
    assert new.named == {"mac": 1, "scalar_op": 0, "spare": 0}
    assert new.level_hit == {"DRAM": 8000, "REG": 0, "SRAM": 1}
    assert new.chain_latency == {"REG": 3}
    kept = (new.fork_join, new.stream_lines, new.stream_reuse, new.stream_restart)
    assert (*kept, new.stream_burst) == (
        COEFFS.fork_join,
        COEFFS.stream_lines,
        COEFFS.stream_reuse,
        COEFFS.stream_restart,
        COEFFS.stream_burst,  # a threshold, not a parameter
    )
    tiny = calibration.with_params(COEFFS, {"stream_hit.DRAM": 0.0})
    assert tiny.stream_hit == {"DRAM": (1, 1, 1)}
    with pytest.raises(KeyError):
        calibration.with_params(COEFFS, {"named.nope": 1.0})


# --- Costs and features -----------------------------------------------------------------------

_PROGRAMS = {
    "matmul_4": "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
    "matmul_3x5x7": (
        "func f(a: f32[3, 5], b: f32[5, 7]) -> c: f32[3, 7] {\n    c = matmul(a, b)\n}\n"
    ),
    "matmul_16x32x8": (
        "func f(a: f32[16, 32], b: f32[32, 8]) -> c: f32[16, 8] {\n    c = matmul(a, b)\n}\n"
    ),
    "matvec_1x256x128": (
        "func f(x: f32[1, 256], w: f32[256, 128]) -> y: f32[1, 128] {\n    y = matmul(x, w)\n}\n"
    ),
}


@pytest.fixture(scope="module")
def impls(ctx: SynthesisContext) -> dict[str, Impl]:
    out = {}
    for name, text in _PROGRAMS.items():
        (func,) = parse_spec_file(f"{name}.lark", text).funcs
        out[name], _ = synthesize(build_program(func, ctx).spec, ctx, {})
    return out


def test_tree_cost_is_the_search_cost(ctx: SynthesisContext, impls: dict[str, Impl]) -> None:
    for impl in impls.values():
        assert calibration.tree_cost(impl, ctx) == impl.cost
    coeffs = ctx.coefficients
    raised = {n: calibration.get_param(coeffs, n) + 1000 for n in calibration.parameters(coeffs)}
    dearer = attrs.evolve(ctx, coefficients=calibration.with_params(coeffs, raised))
    assert all(calibration.tree_cost(i, dearer) > i.cost for i in impls.values())


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_features_times_values_add_up_to_the_cost(
    ctx: SynthesisContext, impls: dict[str, Impl], name: str
) -> None:
    impl = impls[name]
    names = calibration.parameters(ctx.coefficients)
    feats = calibration.features(impl, ctx, names)
    assert len(feats) == len(names)
    assert all(f >= 0 for f in feats)
    assert any(f > 0 for f in feats)
    values = [calibration.get_param(ctx.coefficients, n) for n in names]
    total = sum(v * f for v, f in zip(values, feats, strict=True))
    assert total == pytest.approx(impl.cost, rel=0.01)


_PORTS = {"fp": {"fma": 3, "vector_op": 3}, "load": {"L1": 3, "vector_load": 0}}


@pytest.mark.target("zen1")
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_features_with_resources_add_up_to_the_cost(ctx: SynthesisContext, name: str) -> None:
    # Linear piece by piece: the slopes where the coefficients are, times the coefficients,
    # give the cost back.
    ports = attrs.evolve(ctx, coefficients=attrs.evolve(ctx.coefficients, resources=_PORTS))
    (func,) = parse_spec_file(f"{name}.lark", _PROGRAMS[name]).funcs
    impl, _ = synthesize(build_program(func, ports).spec, ports, {})
    names = calibration.parameters(ports.coefficients)
    assert "resources.fp.fma" in names and "resources.load.vector_load" not in names
    feats = calibration.features(impl, ports, names)
    values = [calibration.get_param(ports.coefficients, n) for n in names]
    total = sum(v * f for v, f in zip(values, feats, strict=True))
    assert total == pytest.approx(impl.cost, rel=0.01)
    # Some resource binds: its prices have slopes.
    assert any(f > 0 for n, f in zip(names, feats, strict=True) if n.startswith("resources."))


def test_resource_prices_are_parameters() -> None:
    coeffs = attrs.evolve(COEFFS, resources={"fp": {"mac": 400, "SRAM": 0}})
    assert calibration.get_param(coeffs, "resources.fp.mac") == 400.0
    moved = calibration.with_params(coeffs, {"resources.fp.mac": 512.4})
    assert moved.resources == {"fp": {"mac": 512, "SRAM": 0}}
    assert coeffs.resources["fp"]["mac"] == 400  # unchanged
    with pytest.raises(KeyError):
        calibration.with_params(coeffs, {"resources.fp.nothing": 1.0})
    with pytest.raises(KeyError):
        calibration.get_param(coeffs, "resources.fp")
    doubled = calibration.scaled(coeffs, 2)
    assert doubled.resources["fp"]["mac"] == 800 and doubled.level_hit["DRAM"] == 16000
    assert doubled.stream_hit["DRAM"] == (16000, 12000, 10000)


# --- The fit ----------------------------------------------------------------------------------

_BASE = CostCoefficients(
    level_hit={"GL": 20, "L1": 2, "RF": 0},
    named={"fma": 1, "op": 3},
    stream_hit={"GL": (20, 15)},
    chain_latency={"RF": 4},
    fork_join=6000,
)
_TRUE = {
    "level_hit.GL": 8000.0,
    "level_hit.L1": 700.0,
    "named.fma": 400.0,
    "named.op": 1300.0,
    "chain_latency.RF": 1500.0,
    "stream_hit.GL": 6000.0,
}


def _synthetic(
    names: list[str], true: dict[str, float], programs: int, noise: float, seed: int = 1
) -> tuple[list[list[float]], list[float]]:
    rng = random.Random(seed)
    rows = [
        [rng.uniform(0, 1000) * rng.choice((0, 1, 1, 1)) * 10 ** rng.randint(0, 3) for _ in names]
        for _ in range(programs)
    ]
    rows = [row for row in rows if any(row)]
    times = [
        sum(true[n] * f for n, f in zip(names, row, strict=True))
        * 1e-12
        * (1 + rng.gauss(0, noise))
        for row in rows
    ]
    return rows, times


def test_fit_recovers_known_coefficients() -> None:
    names = calibration.parameters(_BASE)
    assert sorted(names) == sorted(_TRUE)
    rows, times = _synthetic(names, _TRUE, 200, 0.01)
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    for name, value in _TRUE.items():
        assert calibration.get_param(coeffs, name) == pytest.approx(value, rel=0.03), name
        assert stats["params"][name] == pytest.approx(value, rel=0.03), name
    assert coeffs.stream_hit["GL"][1] == pytest.approx(6000 * 15 / 20, rel=0.03)
    assert coeffs.level_hit["RF"] == 0  # not a parameter: stays free
    assert stats["programs"] == len(rows)
    assert stats["median_rel_error"] < 0.02
    assert stats["max_rel_error"] < 0.1
    # fork_join converted by the fma clock: 400 ps per cycle.
    assert stats["clock_ratio"] == pytest.approx(400, rel=0.03)
    assert coeffs.fork_join == pytest.approx(6000 * 400, rel=0.03)


def test_fit_with_rival_pairs_and_a_prior_recovers_exact_data() -> None:
    names = calibration.parameters(_BASE)
    rows, times = _synthetic(names, _TRUE, 60, 0.0)
    groups = [i // 6 for i in range(len(rows))]  # ten "functions" of six programs
    coeffs, _ = calibration.fit(rows, times, names, _BASE, groups=groups, pair_weight=1.0)
    for name, value in _TRUE.items():
        assert calibration.get_param(coeffs, name) == pytest.approx(value, rel=0.01), name
    # A pull toward the defaults (scaled) moves the answer toward them, and only a little.
    pulled, _ = calibration.fit(rows, times, names, _BASE, prior=0.3, groups=groups)
    for name, value in _TRUE.items():
        assert calibration.get_param(pulled, name) == pytest.approx(value, rel=0.3), name


def test_fit_never_prices_a_streamed_line_above_a_strided_one() -> None:
    # Times that say a streamed main-memory line costs 3 strided halves: the fit may not
    # follow them there (a fit that did chose a walk across the matvec's rows, 1.6x slower).
    names = calibration.parameters(_BASE)
    true = {**_TRUE, "level_hit.GL": 1000.0, "stream_hit.GL": 3000.0}
    rows, times = _synthetic(names, true, 200, 0.0)
    solution = np.linalg.lstsq(np.array(rows), np.array(times) / 1e-12)[0]
    free = dict(zip(names, solution, strict=True))
    assert free["stream_hit.GL"] > 2 * free["level_hit.GL"]  # unconstrained, it would
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    assert max(coeffs.stream_hit["GL"]) <= 2 * coeffs.level_hit["GL"] + 1  # + rounding
    assert stats["params"]["stream_hit.GL"] <= 2 * stats["params"]["level_hit.GL"] * (1 + 1e-9)
    # Stream prices whose first entry is not the dearest are held by the dearest one.
    base = attrs.evolve(_BASE, stream_hit={"GL": (10, 20)})
    coeffs, _ = calibration.fit(rows, times, names, base)
    assert max(coeffs.stream_hit["GL"]) <= 2 * coeffs.level_hit["GL"] + 1
    assert coeffs.stream_hit["GL"][1] == pytest.approx(2 * coeffs.stream_hit["GL"][0], abs=1)


def test_fit_clock_falls_back_to_the_median_ratio() -> None:
    names = ["level_hit.GL", "named.op"]
    rows, times = _synthetic(names, {"level_hit.GL": 8000.0, "named.op": 1200.0}, 50, 0.0)
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    # Ratios 400 (GL: 8000 / 20) and 400 (op: 1200 / 3).
    assert stats["clock_ratio"] == pytest.approx(400, rel=1e-6)
    assert coeffs.fork_join == 2_400_000
    assert coeffs.named["fma"] == 1  # not fitted: kept as it was


def test_fit_clamps_a_negative_solution_to_zero() -> None:
    names = ["named.fma", "named.op"]
    rng = random.Random(2)
    rows = [[rng.uniform(100, 1000), rng.uniform(0, 50)] for _ in range(40)]
    # Time falls as the second feature grows: least squares would make it negative.
    times = [(500 * a - 300 * b) * 1e-12 for a, b in rows]
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    assert stats["params"]["named.op"] == 0.0
    assert coeffs.named["op"] == 0
    assert coeffs.named["fma"] > 0


def test_fit_keeps_a_fitted_zero_level_hit_at_one() -> None:
    names = ["level_hit.L1", "named.fma"]
    rows = [[float(i), float(100 - i)] for i in range(1, 40)]
    times = [f * 400e-12 for _, f in rows]
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    assert stats["params"]["level_hit.L1"] == pytest.approx(0.0, abs=1e-6)
    assert coeffs.level_hit["L1"] == 1


def test_fit_scales_a_parameter_no_program_pays() -> None:
    names = ["named.fma", "named.op"]
    rows = [[float(i), 0.0] for i in range(1, 20)]
    times = [f * 400e-12 for f, _ in rows]
    coeffs, stats = calibration.fit(rows, times, names, _BASE)
    assert coeffs.named == {"fma": 400, "op": 1200}
    assert stats["max_rel_error"] < 1e-9


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no programs"):
        calibration.fit([], [], ["named.fma"], _BASE)
    with pytest.raises(ValueError, match="positive"):
        calibration.fit([[1.0]], [0.0], ["named.fma"], _BASE)
    with pytest.raises(ValueError, match="entries"):
        calibration.fit([[1.0, 2.0]], [1.0], ["named.fma"], _BASE)


def test_fit_stats_without_fitting() -> None:
    names = calibration.parameters(_BASE)
    true = calibration.with_params(_BASE, _TRUE)
    rows, times = _synthetic(names, _TRUE, 30, 0.0)
    exact = calibration.fit_stats(rows, times, names, true, 1e-12)
    assert exact["median_rel_error"] < 1e-3
    assert exact["programs"] == len(rows)
    doubled = calibration.fit_stats(rows, [2 * t for t in times], names, true, 1e-12)
    assert doubled["median_rel_error"] == pytest.approx(0.5, rel=1e-2)
    # Coefficients of no known unit are judged after their best scale: the defaults are
    # off by their ratios only, and the scale is the seconds per unit.
    scaled = calibration.fit_stats(rows, times, names, true)
    assert scaled["unit_s"] == pytest.approx(1e-12, rel=1e-3)
    assert scaled["median_rel_error"] < 1e-3
