"""precompute: every root Spec within the bounds is answered, runs resume, one writer per file."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from stored import wait_until_stored

from morello.cli import main
from morello.context import make_context
from morello.db.sqlite import file_stats
from morello.precompute import exclusive, local_cluster, root_goals, size_lattice

pytest.importorskip("distributed")

pytestmark = pytest.mark.target("zen1")  # solves zen1's Specs (no code runs)

FUNC = "func f{i}(a: f32[{m}, {k}]{la}, b: f32[{k}, {n}]{lb}) -> c: f32[{m}, {n}]{lc} {{\n"
FUNC += "    c = matmul(a, b)\n}}\n"


def _precompute(db: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    argv = [sys.executable, "-m", "morello", "precompute", "--target", "zen1", "--op", "matmul"]
    out = subprocess.run(
        [*argv, "--db", str(db), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    db = tmp_path_factory.mktemp("pre") / "memo.sqlite3"
    return db, _precompute(db, "--up-to", "3", "--workers", "2")


def test_the_goals_are_every_lattice_shape_and_layout() -> None:
    ctx = make_context("zen1")
    assert size_lattice(ctx, 16) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert size_lattice(ctx, 10) == [1, 2, 3, 4, 6, 8, 10]
    goals = root_goals(ctx, "matmul", 3, ["f32"])
    shapes = {shape for shape, _ in goals}
    assert len(shapes) == 27
    # A [1, 1] operand has one layout, a [2, 3] one two (row- and column-major).
    per_shape = {shape: sum(1 for s, _ in goals if s == shape) for shape in shapes}
    assert per_shape[(1, 1, 1)] == 1
    assert per_shape[(2, 2, 2)] == 8
    assert len({spec for _, spec in goals}) == len(goals)
    mixed = root_goals(ctx, "matmul", 2, ["f32", "bf16"])
    dtypes = {tuple(t.dtype.name for t in spec.operands) for _, spec in mixed}
    assert dtypes == {("f32", "f32", "f32"), ("bf16", "bf16", "f32")}


def test_a_precomputed_table_answers_sampled_goals_with_nothing_expanded(
    filled: tuple[Path, dict],  # type: ignore[type-arg]
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, report = filled
    assert report["goals"] == report["solved_goals"] > 0
    assert report["workers"] == 2 and report["stages"] > 1
    rng = random.Random(17)
    layouts = ["", " col_major"]
    funcs = []
    for i in range(12):
        m, k, n = (rng.choice([1, 2, 3]) for _ in range(3))
        la, lb, lc = (rng.choice(layouts) for _ in range(3))
        funcs.append(FUNC.format(i=i, m=m, k=k, n=n, la=la, lb=lb, lc=lc))
    spec = tmp_path / "sample.lark"
    spec.write_text("".join(funcs), encoding="utf-8")
    out_c = tmp_path / "out"
    code = main(["-t", "zen1", str(spec), "--db", str(db), "--stats", "--json", "-o", str(out_c)])
    stats = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [s["specs_visited"] for s in stats] == [0] * 12, stats
    fs = file_stats(db)
    assert fs["solved"] == report["specs_solved"]
    assert fs["free_bytes"] == 0  # compacted at the end
    with sqlite3.connect(db) as conn:  # what the workers passed each other is gone
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "shared" not in names


def test_a_second_precompute_resumes_with_nothing_left(
    filled: tuple[Path, dict],  # type: ignore[type-arg]
) -> None:
    db, report = filled
    again = _precompute(db, "--up-to", "3", "--workers", "1")
    assert again["already"] == report["goals"]
    assert again["solved_goals"] == again["specs_solved"] == 0


def test_a_second_precompute_into_one_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memo.sqlite3"
    with exclusive(db):
        code = main(["precompute", "-t", "zen1", "--op", "matmul", "--up-to", "2", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"morello: error: another precompute (pid {os.getpid()}) is filling")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op", "conv", "--up-to", "2"], "unknown op 'conv' (the rule set has: "),
        (["--op", "matmul", "--up-to", "0"], "argument --up-to: must be 1 or more, found 0"),
        (["--op", "matmul", "--up-to", "2", "--dtypes", "u8"], "implements matmul with"),
        (
            ["--op", "matmul", "--up-to", "2", "--dtypes", "f32,q7"],
            "unknown dtype 'q7' (known: f32,",
        ),
        (["--op", "matmul", "--up-to", "2", "--workers", "0"], "--workers: must be 1 or more"),
        (["--op", "matmul", "--up-to", "2", "--scheduler", "host"], "'host' is not a Dask"),
    ],
)
def test_precompute_bad_arguments_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    db = tmp_path / "memo.sqlite3"
    code = main(["precompute", "-t", "zen1", "--db", str(db), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_killed_precompute_leaves_a_table_that_answers_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "memo.sqlite3"
    argv = [sys.executable, "-m", "morello", "precompute", "-t", "zen1", "--op", "matmul"]
    argv += ["--up-to", "6", "--workers", "1", "--db", str(db), "--json"]
    # Its own session, so that the kill reaches the Dask workers too.
    with subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    ) as proc:
        wait_until_stored(db, 2000, proc)  # until some stages are stored
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    kept = file_stats(db)["solved"]
    assert kept > 2000
    report = _precompute(db, "--up-to", "6", "--workers", "1")
    assert 0 < report["already"] < report["goals"]
    assert report["already"] + report["solved_goals"] == report["goals"]
    final = _precompute(db, "--up-to", "6", "--workers", "1")
    assert final["already"] == final["goals"]


def test_precompute_runs_on_an_existing_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memo.sqlite3"
    with local_cluster(1) as cluster:
        argv = ["precompute", "-t", "zen1", "--op", "matmul", "--up-to", "2", "--db", str(db)]
        code = main([*argv, "--scheduler", cluster.scheduler_address, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["workers"] == 1 and report["goals"] == report["solved_goals"] > 0


def test_an_unreachable_scheduler_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memo.sqlite3"
    argv = ["precompute", "-t", "zen1", "--op", "matmul", "--up-to", "2", "--db", str(db)]
    code = main([*argv, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("morello: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert len(err.strip().splitlines()) == 1


def test_a_cluster_that_will_not_start_is_retried_then_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import distributed

    from morello.errors import MemoTableError

    class Stuck:  # what Dask leaves when its event loop misses its ten seconds
        tries = 0

        def __init__(self, **kwargs: object) -> None:
            Stuck.tries += 1
            raise AssertionError

        def __del__(self) -> None:
            warnings.warn("unclosed cluster", ResourceWarning, stacklevel=1)

    monkeypatch.setattr(distributed, "LocalCluster", Stuck)
    with pytest.raises(MemoTableError, match=r"could not start a local Dask cluster of 2 worker"):
        local_cluster(2)
    assert Stuck.tries == 3
