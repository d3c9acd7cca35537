"""The command line: exit codes and the exact messages for bad input, without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from morello.cli import main
from morello.errors import ExitCode
from morello.plugins import Plugins

_GOOD = "func f(a: f32[2, 2], b: f32[2, 2]) -> c: f32[2, 2] {\n    c = matmul(a, b)\n}\n"


def _spec(tmp_path: Path, text: str, name: str = "spec.lark") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, list[str], str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, err.splitlines(), out


def test_cli_unknown_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    installed = ", ".join(it.target.name for it in Plugins().targets())
    code, err, out = _run(capsys, "--target", "zen2", _spec(tmp_path, _GOOD))
    assert code == ExitCode.USAGE_ERROR == 2
    assert err == [
        f"morello: error: unknown target 'zen2' (installed: {installed}; see --list-targets)"
    ]
    assert out == ""


def test_cli_unknown_op_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    path = _spec(tmp_path, "func f(a: f32[2, 2]) -> c: f32[2, 2] {\n    c = matmull(a, a)\n}\n")
    code, err, out = _run(capsys, "--target", target_name, path)
    assert code == 2
    assert err == [
        f"{path}:2:9: error: unknown op 'matmull' (did you mean 'matmul'?)",
        "        c = matmull(a, a)",
        "            ^",
    ]
    assert out == ""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "func f(a: f32[4, 8], b: f32[4, 8]) -> c: f32[4, 8] {\n    c = matmul(a, b)\n}\n",
            "{path}:2:19: error: shape mismatch in matmul(a[m, k], b[k, n]) -> c[m, n]: "
            "k is 8 in a but 4 in b",
        ),
        (
            "func f(a: f32[4, 4], b: f64[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
            "{path}:2:19: error: dtype mismatch in matmul: a is f32 but b is f64",
        ),
        (
            "func f(x: f32[2, 2], w: f32[2, 2], v: f32[2, 2]) -> y: f32[2, 2] {\n"
            "    h = matmul(x, w)\n"
            "    g = matmul(h, v)\n"
            "    y = matmul(h, v)\n"
            "}\n",
            "{path}:3:5: error: 'g' is assigned but never used",
        ),
        (
            "func f(a: f32[2 2]) -> c: f32[2, 2] {\n    c = move(a)\n}\n",
            "{path}:1:17: error: expected one of ',' or ']', found '2'",
        ),
    ],
    ids=["shape", "dtype", "unused-statement", "syntax"],
)
def test_cli_bad_spec_is_located(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target_name: str,
    source: str,
    expected: str,
) -> None:
    path = _spec(tmp_path, source)
    code, err, out = _run(capsys, "--target", target_name, "--no-db", path)
    assert code == 2
    assert err[0] == expected.replace("{path}", str(path))
    assert len(err) == 3
    assert err[2].strip() == "^"
    assert out == ""


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: None, "no such file or directory"),
        (lambda p: p.mkdir(), "is a directory"),
    ],
    ids=["missing", "directory"],
)
def test_cli_unreadable_spec_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target_name: str,
    make: object,
    reason: str,
) -> None:
    path = tmp_path / "spec.lark"
    make(path)  # type: ignore[operator]
    code, err, out = _run(capsys, "--target", target_name, path)
    assert code == 2
    assert err == [f"morello: error: cannot read spec file {path}: {reason}"]
    assert out == ""


def test_cli_no_spec_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _run(capsys)
    assert code == 2
    assert err == ["morello: error: no spec file given (see --help)"]


def test_cli_bad_rule_file_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    rules = tmp_path / "extra.rules"
    rules.write_text(
        'kernel k:\n    c: f32[1, 1] @RF = zero()\n    cost scalar_op\n    c "{c} = {zz};"\n',
        encoding="utf-8",
    )
    spec = _spec(tmp_path, _GOOD)
    code, err, _ = _run(capsys, "--target", target_name, "--rules", rules, spec)
    assert code == 2
    assert err[0] == f"{rules}:4:14: error: kernel k: unknown placeholder {{zz}} (operands: c)"


@pytest.mark.parametrize("content", [None, "notes.txt"], ids=["empty", "no-rules-file"])
def test_cli_rule_folder_without_rule_files_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str, content: str | None
) -> None:
    # A wrong folder passed to --rules used to add nothing, silently.
    folder = tmp_path / "my_rules"
    folder.mkdir()
    if content:
        (folder / content).write_text("kernel k:\n", encoding="utf-8")
    spec = _spec(tmp_path, _GOOD)
    code, err, out = _run(capsys, "--target", target_name, "--rules", folder, spec)
    assert (code, out) == (2, "")
    assert err == [f"morello: error: rule folder {folder} holds no .rules files"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "s.lark", "--repeats", "0"], "argument --repeats: must be 1 or more, found 0"),
        (["bench", "s.lark", "--min-batch", "nan"], "must be a finite number above 0, found nan"),
        (["bench", "s.lark", "--min-batch", "0"], "must be a finite number above 0, found 0"),
        (["fidelity", "s.lark", "--top", "0"], "argument --top: must be 1 or more, found 0"),
        (["fidelity", "s.lark", "--placements", "-2"], "must be 1 or more, found -2"),
        (["fidelity", "s.lark", "--spacing", "-1"], "must be a finite number 0 or more, found -1"),
        (["fidelity", "s.lark", "--min-batch", "inf"], "must be a finite number above 0"),
        (["fidelity", "s.lark", "--rounds", "0"], "argument --rounds: must be 1 or more, found 0"),
        (["calibrate", "--rounds", "0"], "argument --rounds: must be 1 or more, found 0"),
        (["calibrate", "--per-function", "x"], "expected an integer, found 'x'"),
        (["precompute", "--op", "matmul", "--up-to", "2", "--connect-timeout", "-1"], "above 0"),
    ],
)
def test_cli_bad_numbers_are_one_line_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # Before, --repeats 0 and --min-batch nan stopped bench with a traceback.
    code, err, out = _run(capsys, *argv)
    assert (code, out) == (ExitCode.USAGE_ERROR, "")
    assert len(err) == 1
    assert err[0].startswith(f"morello {argv[0]}: error: ")
    assert message in err[0]
    assert err[0].endswith(" (see --help)")


def test_cli_json_alone_prints_the_statistics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    # --json without --stats used to be ignored, silently.
    spec = _spec(tmp_path, _GOOD)
    code, _, out = _run(capsys, "--target", target_name, spec, "--no-db", "--json")
    assert code == 0
    stats = json.loads(out[out.rindex('\n{\n  "function"') :])
    assert stats["cost"] > 0
    assert "specs_visited" in stats


def test_cli_output_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    # Before, a traceback (FileNotFoundError, IsADirectoryError).
    spec = _spec(tmp_path, _GOOD)
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    out = tmp_path / "plain" / "out"
    code, err, _ = _run(capsys, "--target", target_name, spec, "--no-db", "-o", out)
    assert code == 2
    assert err == [f"morello: error: cannot write {tmp_path / 'plain'}: file exists"]
    (tmp_path / "unit.c").mkdir()
    code, err, _ = _run(capsys, "--target", target_name, spec, "--no-db", "-o", tmp_path / "unit")
    assert code == 2
    assert err == [f"morello: error: cannot write {tmp_path / 'unit.c'}: is a directory"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain", "spec.lark", "unit.c"]


def test_cli_usage_error_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--no-such-option"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "unrecognized arguments: --no-such-option" in err


def test_cli_db_stats_names_an_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    # Not "memo table .../zen2-v6.sqlite3 does not exist": the target is what is wrong.
    installed = ", ".join(it.target.name for it in Plugins().targets())
    code, err, out = _run(capsys, "db", "stats", "--target", "zen2")
    assert code == ExitCode.USAGE_ERROR
    assert err == [
        f"morello: error: unknown target 'zen2' (installed: {installed}; see --list-targets)"
    ]
    assert out == ""


@pytest.mark.parametrize("argv", [["--list-targets"], ["db", "stats", "--db", "DB"]])
def test_cli_output_into_a_closed_pipe_is_not_a_traceback(
    argv: list[str], tmp_path: Path, target_name: str
) -> None:
    """``python -m morello ... | head`` where head has stopped reading: no traceback, no
    "Exception ignored" from the interpreter's flush at exit, exit code 141."""
    db = tmp_path / "t.sqlite3"
    spec = _spec(tmp_path, _GOOD)
    assert main(["--target", target_name, "--db", str(db), str(spec)]) == ExitCode.OK
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        result = subprocess.run(
            [sys.executable, "-m", "morello", *(str(db) if a == "DB" else a for a in argv)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert result.returncode == ExitCode.BROKEN_PIPE == 141
    assert result.stderr == ""


def test_cli_synthesizes_tiny_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    code, err, out = _run(capsys, "--target", target_name, "--no-db", _spec(tmp_path, _GOOD))
    assert code == ExitCode.OK
    assert err == []
    assert "void f(" in out


def test_cli_help_has_an_example() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "morello", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stderr == ""
    assert "examples" in result.stdout
    assert "python -m morello --target TARGET examples/matmul_64.lark" in result.stdout


@pytest.mark.runs_code
@pytest.mark.times_code
def test_cli_bench_text_names_peers_ratio_and_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    spec = _spec(
        tmp_path, "func f(a: f32[8, 8], b: f32[8, 8]) -> c: f32[8, 8] {\n    c = matmul(a, b)\n}\n"
    )
    code, err, out = _run(
        capsys, "bench", "--target", target_name, "--no-db", "--repeats", "1", "--min-batch",
        "0.001", spec,
    )  # fmt: skip
    assert code == ExitCode.OK, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{spec}:f: morello ")
    assert any(line.startswith("  peer openblas: ") and "sgemm" in line for line in lines)
    assert any(line.startswith("  ratio ") and " against " in line for line in lines)
    assert lines[-1].endswith("(compute-bound)")


def test_cli_bench_help_says_peers_run_in_a_child_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "morello", "bench", "--help"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "runs in a child process whose environment holds the target's settings" in text
    assert "pip install 'morello[peers]'" in text


def test_cli_impl_with_output_prints_the_tree_and_writes_the_c(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    """``--impl -o F`` prints the Impl and still writes F.c and F.h (it once wrote nothing)."""
    out_base = tmp_path / "out" / "f.c"
    code, err, out = _run(
        capsys, "--target", target_name, "--no-db", "--impl", "-o", out_base, _spec(tmp_path, _GOOD)
    )
    assert code == 0 and err == []
    assert out.startswith("# f\n") and "cost" in out and "#include" not in out
    c_text = (tmp_path / "out" / "f.c").read_text(encoding="utf-8")
    assert "void f(" in c_text and (tmp_path / "out" / "f.h").is_file()
