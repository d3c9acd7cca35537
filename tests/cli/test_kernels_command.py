"""`python -m morello kernels`: a target's kernels listed, and checked one at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from morello.cli import main
from morello.context import SynthesisContext

#: A right kernel and a wrong one (the absolute value for ReLU), by level roles, so that
#: the file serves every target.
RULES = """\
# Rule set "mine": kernels written by a user, one of them wrong.
kernel mac_right_f32:
    c: f32[1, 1] @registers|cache += matmul(a: f32[1, 1] @registers, b: f32[1, 1] @registers|cache)
    cost mac
    c "{c} += {a} * {b};"

kernel relu_wrong_f32:
    c: f32[1, 1] @registers|cache = relu(a: f32[1, 1] @registers|cache)
    cost mac
    c "{c} = {a} > 0 ? {a} : -{a};"
"""


def _rules(tmp_path: Path, text: str = RULES) -> str:
    path = tmp_path / "mine.rules"
    path.write_text(text)
    return str(path)


def test_lists_every_kernel_with_its_place_and_pattern(
    ctx: SynthesisContext, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["kernels", "-t", ctx.target.name, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kernel"] for r in rows] == [k.name for k in ctx.ruleset.kernels]
    for row in rows:
        path, line, col = row["location"].rsplit(":", 2)
        assert path.endswith(".rules") and int(line) >= 1 and int(col) >= 1
        assert row["pattern"]  # the Spec its pattern describes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch_f32"], "has no kernel 'nosuch_f32' (list them with"),
        (["--check", "--rules", "EMPTY"], "the --rules files declare no kernel for"),
    ],
)
def test_bad_requests_are_one_line_errors(
    ctx: SynthesisContext,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    empty = _rules(tmp_path, "# Rule set 'mine': nothing yet.\n")
    args = [empty if a == "EMPTY" else a for a in args]
    assert main(["kernels", "-t", ctx.target.name, *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.runs_code
def test_check_passes_a_right_kernel_and_fails_a_wrong_one(
    ctx: SynthesisContext, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --rules and no names, only that file's kernels are checked; a wrong template
    fails with NumPy's element beside ours, and the exit status is 1."""
    rules = _rules(tmp_path)
    code = main(["kernels", "-t", ctx.target.name, "--rules", rules, "--check", "--json"])
    reports = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 1
    assert set(reports) == {"mac_right_f32", "relu_wrong_f32"}
    assert reports["mac_right_f32"]["outcome"] == "passed"
    assert "matches NumPy on 3 inputs" in reports["mac_right_f32"]["detail"]
    wrong = reports["relu_wrong_f32"]
    assert wrong["outcome"] == "failed"
    assert wrong["location"].endswith("mine.rules:7:1")
    assert "first mismatch at" in wrong["detail"]
    # Named, the right one alone passes: exit 0, and a summary line.
    assert (
        main(["kernels", "-t", ctx.target.name, "--rules", rules, "--check", "mac_right_f32"]) == 0
    )
    out, err = capsys.readouterr()
    assert out.startswith("passed   mac_right_f32")
    assert err.strip() == f"1 kernel of {ctx.target.name} checked: 1 passed, 0 failed, 0 skipped"


@pytest.mark.target("zen1")
def test_a_kernel_no_root_reaches_fails_saying_what_was_tried(
    ctx: SynthesisContext, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(No code runs: the search finds no root whose program uses the kernel.)"""
    rules = _rules(
        tmp_path,
        "kernel add_unreached_f32:\n"
        "    c: f32[1, 1] @VRF v8 = add(a: f32[1, 1] @RF, b: f32[1, 1] @RF)\n"
        "    cost mac\n"
        '    c "{c} = {a} + {b};"\n',
    )
    assert main(["kernels", "-t", "zen1", "--rules", rules, "--check"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("failed   add_unreached_f32")
    assert "no root Spec reaches kernel add_unreached_f32; tried f32[1, 1] @GL = add(" in out
