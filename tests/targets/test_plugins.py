"""Target plugins: inline registration, entry-point discovery, validation, --list-targets."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import toy_target

from morello import CostCoefficients, MemoryLevel, Target, __version__, hookimpl
from morello.cli import main
from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.errors import TargetError
from morello.lang.spec_file import build_program, parse_spec_file
from morello.plugins import Plugins
from morello.search.solve import synthesize

MATMUL_4 = """\
func matmul_4(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {
    c = matmul(a, b)
}
"""


def _module(name: str, **attrs: object) -> ModuleType:
    mod = ModuleType(name)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def _targets_hook(*targets: Target) -> object:
    @hookimpl
    def morello_targets() -> list[Target]:
        return list(targets)

    return morello_targets


def test_plugins_toy_registered_inline_synthesizes_matmul_matching_numpy(tmp_path: Path) -> None:
    ctx = make_context("toy", plugins=Plugins(modules=[toy_target], entry_points=True))
    program = build_program(parse_spec_file("matmul_4.lark", MATMUL_4).funcs[0], ctx)
    impl, _ = synthesize(program.spec, ctx)
    source = lower_to_c("matmul_4", [(program, impl)], ctx)
    lib = compile_shared(source.c_text, ctx.target, tmp_path)
    check(lib, program, ctx)  # raises CheckFailed on a mismatch
    assert ctx.target.name == "toy"
    assert ctx.coefficients.named["mac"] == 1


def test_plugins_entry_point_in_dist_info_is_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tmp_path_plugin.py").write_text(
        textwrap.dedent(
            """\
            from __future__ import annotations

            from morello import CostCoefficients, MemoryLevel, Target, hookimpl

            LONE = Target(
                name="lone",
                description="a target from an installed distribution",
                levels=(MemoryLevel(name="GL", capacity=1 << 20),),
            )

            @hookimpl
            def morello_targets():
                return [LONE]

            @hookimpl
            def morello_cost_coefficients(target):
                if target.name == "lone":
                    return CostCoefficients(level_hit={"GL": 1}, named={})
                return None
            """
        ),
        encoding="utf-8",
    )
    dist_info = tmp_path / "morello_lone-1.2.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: morello-lone\nVersion: 1.2\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[morello]\nlone = tmp_path_plugin\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, "tmp_path_plugin", raising=False)

    installed = {it.target.name: it for it in Plugins().targets()}

    assert "lone" in installed
    assert installed["lone"].plugin == "lone"
    assert installed["lone"].dist == "morello-lone 1.2"
    assert Plugins().cost_coefficients(installed["lone"].target).level_hit == {"GL": 1}


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> Path:
    """An installed distribution ``morello-broken 0.1`` whose entry point loads ``module``."""
    path = tmp_path / f"{module}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    dist_info = tmp_path / "morello_broken-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: morello-broken\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(f"[morello]\nbroken = {module}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, module, raising=False)
    return path


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (  # a Target that its own validation refuses, built when the module is imported
            """\
            from morello import MemoryLevel, Target

            BAD = Target(name="bad", description="", levels=(MemoryLevel(name="GL", capacity=0),))
            """,
            "plugin 'broken' (morello-broken 0.1) failed to load at {path}:3: "
            "ValueError: capacity must be positive, got 0",
        ),
        (
            "def oops(:\n",
            "plugin 'broken' (morello-broken 0.1) failed to load: "
            "SyntaxError: invalid syntax ({name}, line 1)",
        ),
        (  # the same Target built in the hook
            """\
            from morello import MemoryLevel, Target, hookimpl

            @hookimpl
            def morello_targets():
                level = MemoryLevel(name="GL", capacity=0)
                return [Target(name="bad", description="", levels=(level,))]
            """,
            "plugin 'broken': morello_targets failed at {path}:5: "
            "ValueError: capacity must be positive, got 0",
        ),
    ],
    ids=["import", "syntax", "hook"],
)
def test_plugins_a_broken_installed_plugin_is_a_one_line_error_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
    expected: str,
) -> None:
    path = _install(tmp_path, monkeypatch, "tmp_path_broken_plugin", source)
    want = expected.replace("{path}", str(path)).replace("{name}", path.name)
    assert main(["--list-targets"]) == 2
    assert capsys.readouterr().err == f"morello: error: {want}\n"
    # Blocked, it is not imported at all.
    monkeypatch.delitem(sys.modules, "tmp_path_broken_plugin", raising=False)
    assert "zen1" in {it.target.name for it in Plugins(block=["broken"]).targets()}


def test_plugins_misspelled_hook_fails_check_pending_naming_plugin() -> None:
    @hookimpl
    def morello_target() -> list[Target]:
        return []

    typo = _module("typo_plugin", morello_target=morello_target)

    with pytest.raises(TargetError) as info:
        Plugins(modules=[typo], entry_points=False)

    assert str(info.value) == (
        "morello: error: plugin 'typo_plugin' implements unknown hook 'morello_target' "
        "(known hooks: morello_cost_coefficients, morello_rewrite_schemas, morello_rule_paths, "
        "morello_size_policies, morello_targets)"
    )


def test_plugins_hookimpl_with_unknown_argument_names_plugin() -> None:
    @hookimpl
    def morello_cost_coefficients(tgt: Target) -> CostCoefficients | None:
        return None

    wrong = _module("wrong_args_plugin", morello_cost_coefficients=morello_cost_coefficients)

    with pytest.raises(TargetError) as info:
        Plugins(modules=[wrong], entry_points=False)

    message = str(info.value)
    assert message.startswith("morello: error: invalid plugin 'wrong_args_plugin': ")
    assert "'tgt'" in message
    assert "\n" not in message


def test_plugins_targets_hook_returning_a_single_target_names_plugin() -> None:
    @hookimpl
    def morello_targets() -> Target:
        return toy_target.TOY

    single = _module("single_plugin", morello_targets=morello_targets)

    with pytest.raises(TargetError) as info:
        Plugins(modules=[single], entry_points=False).targets()

    assert str(info.value) == (
        "morello: error: plugin 'single_plugin': morello_targets returned Target, "
        "not an iterable of Targets"
    )


def test_plugins_blocked_plugin_is_absent_from_targets() -> None:
    names = [it.target.name for it in Plugins(block=["zen1"]).targets()]
    assert "zen1" not in names
    assert "zen1" in [it.target.name for it in Plugins().targets()]


def test_plugins_duplicate_target_name_names_both_plugins() -> None:
    first = _module("first_plugin", morello_targets=_targets_hook(toy_target.TOY))
    second = _module("second_plugin", morello_targets=_targets_hook(toy_target.TOY))

    with pytest.raises(TargetError) as info:
        Plugins(modules=[first, second], entry_points=False).targets()

    assert "'first_plugin'" in str(info.value)
    assert "'second_plugin'" in str(info.value)
    assert "'toy'" in str(info.value)


def test_plugins_hook_returning_non_target_names_plugin() -> None:
    bad = _module("bad_plugin", morello_targets=_targets_hook("toy"))  # type: ignore[arg-type]

    with pytest.raises(TargetError, match="plugin 'bad_plugin' returned str, not a Target"):
        Plugins(modules=[bad], entry_points=False).targets()


def test_plugins_calibration_plugin_tryfirst_overrides_target_defaults() -> None:
    @hookimpl(tryfirst=True)
    def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
        return CostCoefficients(level_hit={"DRAM": 99, "SRAM": 9, "REG": 0}, named={"mac": 7})

    calibration = _module("calibration", morello_cost_coefficients=morello_cost_coefficients)
    plugins = Plugins(modules=[toy_target, calibration], entry_points=False)

    assert plugins.cost_coefficients(toy_target.TOY).named == {"mac": 7}
    assert Plugins(modules=[toy_target], entry_points=False).cost_coefficients(
        toy_target.TOY
    ).named == {"mac": 1, "scalar_op": 1}


def test_plugins_coefficients_missing_a_level_is_an_error() -> None:
    lonely = Target(
        name="lonely",
        levels=(MemoryLevel(name="GL", capacity=1 << 20), MemoryLevel(name="RF", capacity=4)),
    )

    @hookimpl
    def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
        return CostCoefficients(level_hit={"GL": 1}, named={})

    plugin = _module(
        "lonely_plugin",
        morello_targets=_targets_hook(lonely),
        morello_cost_coefficients=morello_cost_coefficients,
    )
    with pytest.raises(TargetError, match=r"cost coefficients for 'lonely' lack level\(s\) RF"):
        Plugins(modules=[plugin], entry_points=False).cost_coefficients(lonely)


def test_plugins_a_hook_that_raises_is_an_error_naming_the_plugin_and_line() -> None:
    lonely = Target(name="lonely", levels=(MemoryLevel(name="GL", capacity=1 << 20),))

    def helper() -> None:
        raise RuntimeError("no coefficients today")

    @hookimpl
    def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
        helper()
        return None

    @hookimpl
    def morello_rule_paths(target: Target) -> list[Path]:
        return [Path("a")] + 1  # type: ignore[operator]

    plugin = _module(
        "lonely_plugin",
        morello_targets=_targets_hook(lonely),
        morello_cost_coefficients=morello_cost_coefficients,
        morello_rule_paths=morello_rule_paths,
    )
    plugins = Plugins(modules=[plugin], entry_points=False)
    here = re.escape(__file__)
    with pytest.raises(TargetError) as info:
        plugins.cost_coefficients(lonely)
    assert re.fullmatch(  # the innermost line in the plugin's file: helper's raise
        rf"plugin 'lonely_plugin': morello_cost_coefficients failed at {here}:\d+: "
        "RuntimeError: no coefficients today",
        info.value.message,
    )
    with pytest.raises(TargetError) as info:
        plugins.rule_paths(lonely)
    assert re.fullmatch(
        rf"plugin 'lonely_plugin': morello_rule_paths failed at {here}:\d+: TypeError: .*",
        info.value.message,
    )


def test_plugins_a_hook_that_raises_a_morello_error_passes_it_on_unchanged() -> None:
    lonely = Target(name="lonely", levels=(MemoryLevel(name="GL", capacity=1 << 20),))

    @hookimpl
    def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
        raise TargetError("the calibration file is damaged")

    plugin = _module(
        "lonely_plugin",
        morello_targets=_targets_hook(lonely),
        morello_cost_coefficients=morello_cost_coefficients,
    )
    with pytest.raises(TargetError) as info:
        Plugins(modules=[plugin], entry_points=False).cost_coefficients(lonely)
    assert info.value.message == "the calibration file is damaged"


def test_plugins_a_schema_or_size_policy_hook_that_raises_names_the_plugin() -> None:
    @hookimpl
    def morello_size_policies() -> dict[str, object]:
        return {"halves": None, **{}.fromkeys(1)}  # type: ignore[arg-type]

    plugins = Plugins(
        modules=[_module("sizes_plugin", morello_size_policies=morello_size_policies)]
    )
    with pytest.raises(TargetError) as info:
        plugins.size_policies()
    assert re.fullmatch(
        rf"plugin 'sizes_plugin': morello_size_policies failed at {re.escape(__file__)}:\d+: "
        "TypeError: .*",
        info.value.message,
    )


def test_plugins_unknown_target_lists_installed_ones() -> None:
    plugins = Plugins(modules=[toy_target], entry_points=False)
    with pytest.raises(TargetError) as info:
        plugins.target("nope")
    assert str(info.value) == (
        "morello: error: unknown target 'nope' (installed: toy; see --list-targets)"
    )


def test_plugins_none_installed_says_how_to_install() -> None:
    with pytest.raises(TargetError) as info:
        Plugins(entry_points=False).target("toy")
    assert str(info.value) == (
        "morello: error: unknown target 'toy': no targets installed; run `pip install -e .`"
    )


def test_plugins_list_targets_shows_name_description_and_distribution(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--list-targets"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.split()[:1] == ["zen1"]]
    assert len(lines) == 1
    assert "AMD Zen 1 (runs on any x86-64 with AVX2 and FMA)" in lines[0]
    assert lines[0].endswith(f"[morello {__version__}]")
