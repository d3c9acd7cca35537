"""Golden C: the generated source of small specs, compared byte for byte; and determinism.

Goldens live in ``tests/codegen/golden/<target>/<module>/<test>.<ext>``, one set per target
under test (its own kernels make its own C). ``pytest --update-golden``
rewrites them; review the diff and commit it with the change that caused it. A missing golden
fails with instructions. The one line that names the Morello version is normalized to
``<version>`` before comparing, so a release does not touch the goldens.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from morello import __version__
from morello.codegen.header import CSource, lower_to_c
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize

GOLDEN_ROOT = Path(__file__).parent / "golden"

MATMUL_8_ROW = """\
# 8x8x8 f32 matmul, every operand row-major in main memory.
func matmul_8x8x8(a: f32[8, 8], b: f32[8, 8]) -> c: f32[8, 8] {
    c = matmul(a, b)
}
"""

MATMUL_8_COL_B = """\
# 8x8x8 f32 matmul with b column-major.
func matmul_8x8x8_col_b(a: f32[8, 8], b: f32[8, 8] col_major) -> c: f32[8, 8] {
    c = matmul(a, b)
}
"""


#: ``golden(text, ext=".c")``: compare ``text`` with the running test's golden file.
GoldenCheck = Callable[..., None]


class GoldenMismatch(AssertionError):
    """Generated text differs from its golden, or the golden is missing."""


def normalize(text: str) -> str:
    """``text`` with the Morello version replaced, so releases keep goldens stable."""
    return text.replace(f"Morello {__version__} ", "Morello <version> ")


def compare_golden(path: Path, text: str, update: bool, nodeid: str) -> None:
    """Compare ``text`` with the golden file at ``path``, or rewrite it when ``update``.

    Raises:
        GoldenMismatch: the golden is missing or differs (with a unified diff).
    """
    data = normalize(text).encode("utf-8")
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    if not path.exists():
        raise GoldenMismatch(
            f"golden file {path} is missing; create it with\n"
            f"    python -m pytest '{nodeid}' --update-golden\n"
            "then review the new file and commit it"
        )
    want = path.read_bytes()
    if data != want:
        diff = difflib.unified_diff(
            want.decode("utf-8").splitlines(keepends=True),
            data.decode("utf-8").splitlines(keepends=True),
            fromfile=f"{path} (golden)",
            tofile="generated",
        )
        raise GoldenMismatch(
            f"generated text differs from {path}:\n{''.join(diff)}\n"
            "if the change is intended, rerun with --update-golden and commit the diff"
        )


@pytest.fixture
def golden(request: pytest.FixtureRequest, target_name: str) -> GoldenCheck:
    """``golden(text, ext)`` compares ``text`` with this test's golden file for the target
    under test."""
    update = bool(request.config.getoption("--update-golden"))
    module = Path(str(request.node.path)).stem
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")

    def check(text: str, ext: str = ".c") -> None:
        path = GOLDEN_ROOT / target_name / module / f"{test}{ext}"
        compare_golden(path, text, update, request.node.nodeid)

    return check


def lower_spec_text(text: str, unit: str, ctx: SynthesisContext) -> CSource:
    """Synthesize every function of a spec file with a fresh memo and lower them together."""
    spec_file = parse_spec_file(f"{unit}.lark", text)
    memo: dict = {}
    solved = []
    for func in spec_file.funcs:
        program = build_program(func, ctx)
        impl, _ = synthesize(program.spec, ctx, memo)
        solved.append((program, impl))
    return lower_to_c(unit, solved, ctx)


@pytest.fixture(scope="module")
def matmul_8_row(ctx: SynthesisContext) -> CSource:
    return lower_spec_text(MATMUL_8_ROW, "matmul_8x8x8", ctx)


def test_golden_c_matmul_8x8x8_row_major(matmul_8_row: CSource, golden: GoldenCheck) -> None:
    golden(matmul_8_row.c_text, ".c")


def test_golden_c_matmul_8x8x8_row_major_header(matmul_8_row: CSource, golden: GoldenCheck) -> None:
    golden(matmul_8_row.h_text, ".h")


def test_golden_c_matmul_8x8x8_col_major_b(ctx: SynthesisContext, golden: GoldenCheck) -> None:
    golden(lower_spec_text(MATMUL_8_COL_B, "matmul_8x8x8_col_b", ctx).c_text, ".c")


def test_golden_missing_file_fails_with_instructions(tmp_path: Path) -> None:
    path = tmp_path / "golden" / "absent.c"
    with pytest.raises(GoldenMismatch, match=r"is missing; create it with") as info:
        compare_golden(path, "int x;\n", update=False, nodeid="tests/x.py::test_x")
    assert "python -m pytest 'tests/x.py::test_x' --update-golden" in str(info.value)
    assert not path.exists()


def test_golden_mismatch_shows_diff_and_update_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "g.c"
    compare_golden(path, "int x;\n", update=True, nodeid="n")
    compare_golden(path, "int x;\n", update=False, nodeid="n")
    with pytest.raises(GoldenMismatch, match=r"(?s)-int x;\n\+int y;.*--update-golden"):
        compare_golden(path, "int y;\n", update=False, nodeid="n")
    compare_golden(path, "int y;\n", update=True, nodeid="n")
    assert path.read_bytes() == b"int y;\n"


def test_golden_normalize_hides_only_the_version() -> None:
    text = f"/* Generated by Morello {__version__} for target zen1. */\nint x;\n"
    assert normalize(text) == "/* Generated by Morello <version> for target zen1. */\nint x;\n"


# ---- determinism ------------------------------------------------------------------------


def test_synthesis_same_spec_twice_gives_identical_c(ctx: SynthesisContext) -> None:
    first = lower_spec_text(MATMUL_8_COL_B, "unit", ctx)
    second = lower_spec_text(MATMUL_8_COL_B, "unit", ctx)
    assert first.c_text == second.c_text
    assert first.h_text == second.h_text


def test_synthesis_warm_memo_gives_same_c_as_cold(ctx: SynthesisContext) -> None:
    # Solve other shapes first, so the 8x8x8 search finds many sub-problems already solved.
    warm: dict = {}
    other = (
        "func wide(a: f32[8, 8], b: f32[8, 16]) -> c: f32[8, 16] { c = matmul(a, b) }\n"
        "func deep(a: f32[8, 16], b: f32[16, 8]) -> c: f32[8, 8] { c = matmul(a, b) }\n"
    )
    for func in parse_spec_file("other.lark", other).funcs:
        synthesize(build_program(func, ctx).spec, ctx, warm)
    program = build_program(parse_spec_file("m.lark", MATMUL_8_ROW).funcs[0], ctx)
    warm_impl, warm_stats = synthesize(program.spec, ctx, warm)
    cold_impl, cold_stats = synthesize(program.spec, ctx, {})
    assert warm_stats.specs_visited < cold_stats.specs_visited  # the memo was used
    warm_c = lower_to_c("unit", [(program, warm_impl)], ctx).c_text
    assert warm_c == lower_to_c("unit", [(program, cold_impl)], ctx).c_text


def test_synthesis_c_is_independent_of_hash_seed(tmp_path: Path, target_name: str) -> None:
    # Set or dict iteration by hash order would show up as different C under different seeds.
    spec = tmp_path / "m.lark"
    spec.write_text(MATMUL_8_COL_B, encoding="utf-8")
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "morello", "--target", target_name, str(spec)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
