"""``benchmarks/fuzz.py --memo table``: each worker also fills a memo table file, checks the
programs it gives and compares their costs with the in-memory memo's."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import attrs
import pytest

from morello.db.table import MemoTable

pytestmark = [
    pytest.mark.target("zen1"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found"),
]
ARGS = ["--count", "6", "--seed", "7100", "--max-extent", "8", "--memo", "table"]


@pytest.fixture
def fuzz(
    benchmark_script: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    module = benchmark_script("fuzz")
    # release and reopen the file within a few cases (one worker: this process)
    monkeypatch.setattr(module, "RELEASE_EVERY", 2)
    monkeypatch.setattr(module, "REOPEN_EVERY", 3)
    return module


def test_the_table_files_programs_pass_at_the_memos_costs(
    fuzz: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fuzz.main([*ARGS, "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "memo table" in out and "wrong              0" in out
    assert not list(tmp_path.iterdir())


def test_a_cost_that_differs_is_a_wrong_case(
    fuzz: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    honest = fuzz.check_case

    def off_by_one(case, ctx, memo, workdir, jobs=1):  # type: ignore[no-untyped-def]
        run = honest(case, ctx, memo, workdir, jobs)
        return attrs.evolve(run, cost=run.cost + 1) if isinstance(memo, MemoTable) else run

    monkeypatch.setattr(fuzz, "check_case", off_by_one)
    assert fuzz.main([*ARGS, "--keep", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "(cost differs)" in out
    kept = list(tmp_path.glob("*.lark"))
    assert kept and "a search with the in-memory memo found" in kept[0].read_text()


def test_walks_with_the_table_file(
    fuzz: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fuzz.main([*ARGS, "--walks", "2", "--keep", str(tmp_path)]) == 0
    assert ", 2 walks" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["--walks", "2", "--jobs", "2"], ["--memo", "dict"]])
def test_walks_need_the_table_and_one_worker(
    fuzz: ModuleType, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        fuzz.main([*ARGS, "--walks", "2", *extra])
    assert exc.value.code == 2
    assert "--walks needs --memo table and --jobs 1" in capsys.readouterr().err
