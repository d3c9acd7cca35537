"""``check`` raises on a wrong answer (and only then), with the message the CLI prints.

The compile-and-compare tests call ``check`` without asserting its result: a mismatch raises
``CheckFailed``. These tests make sure that is so, with code that is wrong on purpose: a
hand-written function, and a kernel from a rule file that overwrites instead of accumulating,
which synthesis picks because it looks cheaper.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from morello.cli import main
from morello.codegen import harness
from morello.codegen.compile import KEEP_FILES_ENV, compile_shared
from morello.context import SynthesisContext
from morello.errors import CheckFailed, ExitCode
from morello.lang.spec_file import build_program, parse_spec_file

SPEC = "func f(a: f32[2, 3], b: f32[3, 2]) -> c: f32[2, 2] {\n    c = matmul(a, b)\n}\n"

ZEROS = """\
void f(const float *restrict a, const float *restrict b, float *restrict c)
{
    (void)a;
    (void)b;
    for (int i = 0; i < 4; i++)
        c[i] = 0.0f;
}
"""

WRONG_RULES = """\
# A scalar multiply that forgets to accumulate: free, so cheaper than any target's kernels,
# and wrong. Levels by role, so every target has them.
kernel overwrite_f32:
    c: f32[1, 1] @registers|cache += matmul(
        a: f32[1, 1] @registers|cache, b: f32[1, 1] @registers|cache)
    cost 0 * scalar_op
    c "{c} = {a} * {b};"
"""


@pytest.mark.runs_code
def test_check_raises_on_a_wrong_answer_with_the_first_mismatch(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    program = build_program(parse_spec_file("<f>", SPEC).funcs[0], ctx)
    lib = compile_shared(ZEROS, ctx.target, tmp_path)
    inputs = harness.random_inputs(program, ctx)
    want = harness.reference(program, inputs, ctx)
    allowed = harness.tolerance(program, inputs, ctx)
    with pytest.raises(CheckFailed) as info:
        harness.check(lib, program, ctx)
    assert str(info.value) == (
        f"morello: error: check failed for f: max abs error {float(abs(want).max()):.3g} "
        f"(allowed up to {float(allowed.max()):.3g}); first mismatch at [0, 0]: "
        f"got 0, expected {want[0, 0]:.7g}"
    )


def test_compare_takes_an_equal_infinity_or_nan_whatever_its_bound() -> None:
    nan, inf = float("nan"), float("inf")
    want = np.array([inf, -inf, nan, 1.0])
    allowed = np.array([nan, nan, nan, 1e-6])
    assert harness.compare(np.array([inf, -inf, nan, 1.0], np.float32), want, allowed).ok
    for i, wrong in enumerate([-inf, inf, 0.0, nan]):
        got = np.array([inf, -inf, nan, 1.0], np.float32)
        got[i] = wrong
        result = harness.compare(got, want, allowed)
        assert result.first_bad == (i,), wrong
        assert result.max_allowed == 1e-6  # the largest bound that is a number


@pytest.mark.runs_code
def test_check_passes_a_division_by_zero_that_gives_the_references_infinities(
    ctx: SynthesisContext, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "div0.lark"
    spec.write_text(
        "func f(x: f32[2, 8], z: f32[2, 8]) -> y: f32[2, 8] {\n    y = div(x, sub(z, z))\n}\n",
        encoding="utf-8",
    )
    assert main(["--target", ctx.target.name, "--no-db", "--check", str(spec)]) == 0
    assert capsys.readouterr().err == (
        "check passed: f matches NumPy (every element an infinity or NaN equal to NumPy's)\n"
    )


@pytest.mark.runs_code
def test_cli_check_exits_1_when_a_kernel_is_wrong(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the kept scratch folder goes here
    rules = tmp_path / "wrong.rules"
    rules.write_text(WRONG_RULES, encoding="utf-8")
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    code = main(
        ["--target", target_name, "--no-db", "--rules", str(rules), "--impl", "--check", str(spec)]
    )
    out, err = capsys.readouterr()
    assert "kernel overwrite_f32" in out
    assert code == ExitCode.CHECK_FAILED == 1
    (line,) = err.splitlines()
    assert line.startswith("morello: error: check failed for f: max abs error ")


@pytest.mark.runs_code
@pytest.mark.parametrize("case", ["passes", "fails", "kept"])
def test_cli_check_removes_its_scratch_folder_unless_it_failed_or_is_asked_to_keep_it(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target_name: str,
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where mkdtemp makes folders
    monkeypatch.delenv(KEEP_FILES_ENV, raising=False)
    if case == "kept":
        monkeypatch.setenv(KEEP_FILES_ENV, "1")
    spec = tmp_path / "f.lark"
    spec.write_text(SPEC, encoding="utf-8")
    args = ["--target", target_name, "--no-db", "--check", "-o", str(tmp_path / "f.c")]
    if case == "fails":
        rules = tmp_path / "wrong.rules"
        rules.write_text(WRONG_RULES, encoding="utf-8")
        args += ["--rules", str(rules)]
    code = main([*args, str(spec)])
    capsys.readouterr()
    assert code == (ExitCode.CHECK_FAILED if case == "fails" else 0)
    left = [p.name for p in scratch.iterdir()]
    if case == "passes":
        assert left == []
    else:
        (folder,) = left  # the C and the library, for a look at what went wrong
        assert folder.startswith("morello-check-")
        assert (scratch / folder / "morello_unit.c").is_file()
