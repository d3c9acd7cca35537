"""Synthesis with helper walks (``synthesize(..., jobs=N)``): the same program as one walk,
every answer a helper sends is the one a walk alone finds, what it sends reaches the memo
table, and no helper process outlives the call."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import attrs
import pytest

from morello.context import SynthesisContext, make_context
from morello.db.sqlite import open_table
from morello.db.table import MISSING, Stored, decision_of
from morello.errors import NoImplementationError
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search import parallel, solve
from morello.search.solve import answerer, synthesize, walking
from morello.spec import Spec

pytestmark = [
    pytest.mark.skipif(
        "fork" not in multiprocessing.get_all_start_methods(), reason="helper walks need fork"
    ),
    # JAX warns at every fork once it is loaded (another test in this process may have)
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

DENSE = """\
func dense(x: f32[4, 16], w: f32[16, 8], b: f32[8]) -> y: f32[4, 8] {
    y = relu(add(matmul(x, w), b))
}
"""


@pytest.fixture(autouse=True)
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Helpers start even where another test loaded JAX (they never touch it)."""
    monkeypatch.setattr(parallel, "_THREADED_LIBRARIES", ())


def spec_of(ctx: SynthesisContext, text: str) -> Spec:
    (func,) = parse_spec_file("<test>", text).funcs
    return build_program(func, ctx).spec


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every answer the caller's walk takes in from helpers, as sent."""
    got: list[tuple] = []
    take_in = solve._Walk.take_in

    def recording(self, answers):  # type: ignore[no-untyped-def]
        got.extend(answers)
        return take_in(self, answers)

    monkeypatch.setattr(solve._Walk, "take_in", recording)
    return got


@pytest.mark.parametrize("jobs", [2, 3])
def test_helpers_give_the_program_one_walk_gives(
    ctx: SynthesisContext, matmul_spec, taken: list[tuple], jobs: int
) -> None:
    for spec in (matmul_spec(8, 16, 8), spec_of(ctx, DENSE)):
        alone, alone_stats = synthesize(spec, ctx)
        helped, stats = synthesize(spec, ctx, jobs=jobs)
        assert helped == alone
        assert helped.cost == alone.cost
        assert alone_stats.specs_taken_in == 0
        # the helpers did part of the work: their answers arrived and were used
        assert stats.specs_taken_in > 0
        assert stats.specs_visited < alone_stats.specs_visited
    assert taken


def test_every_answer_a_helper_sends_is_the_walks_own(
    ctx: SynthesisContext, taken: list[tuple]
) -> None:
    synthesize(spec_of(ctx, DENSE), ctx, jobs=2)
    assert len(taken) > 100
    answer = answerer(ctx)
    with walking():
        for spec, decision, cost, peaks, _ceiling in taken:
            own = answer(spec)
            if decision is None:
                assert own is None, spec.describe()
                continue
            assert own is not None, spec.describe()
            own_decision = own.decision if isinstance(own, Stored) else decision_of(own.action)
            assert (own_decision, own.cost, own.peaks) == (decision, cost, peaks), spec.describe()


def test_what_helpers_solve_is_stored_in_the_memo_table(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    spec = spec_of(ctx, DENSE)
    table = open_table(tmp_path / "memo.db", ctx)
    try:
        first, stats = synthesize(spec, ctx, table, jobs=2)
        assert stats.specs_taken_in > 0
    finally:
        table.close()
    table = open_table(tmp_path / "memo.db", ctx)
    try:
        again, stats = synthesize(spec, ctx, table, jobs=2)
    finally:
        table.close()
    assert again == first
    assert stats.specs_visited == 0  # everything read back, helpers' answers too
    assert stats.specs_taken_in == 0  # and none started


def test_a_dict_memo_gets_every_spec_as_with_one_walk(ctx: SynthesisContext) -> None:
    spec = spec_of(ctx, DENSE)
    alone: dict = {}
    helped: dict = {}
    synthesize(spec, ctx, alone)
    _, stats = synthesize(spec, ctx, helped, jobs=2)
    assert stats.specs_taken_in == 0  # no helpers: their answers are not Solutions
    assert helped.keys() == alone.keys()


def helper_sends(spec: Spec, ctx: SynthesisContext, db: Path | None) -> list[tuple]:
    """Everything helper 1 of 2 sends when it walks ``spec`` to the end, run here (not
    forked) so that nothing stops it early."""
    to_helper = multiprocessing.Pipe(duplex=False)  # (reader, writer)
    from_helper = multiprocessing.Pipe(duplex=False)
    sent: list[tuple] = []

    def drain() -> None:
        with contextlib.suppress(EOFError):
            while True:
                sent.extend(pickle.loads(from_helper[0].recv_bytes()))

    reader = threading.Thread(target=drain)
    reader.start()
    to_helper[1].close()  # the first walk sends nothing
    sigint = signal.getsignal(signal.SIGINT)
    try:
        parallel._help(spec, ctx, 1, 2, ([to_helper[0]], [from_helper[1]]), [], os.getppid(), db)
    finally:
        signal.signal(signal.SIGINT, sigint)
    reader.join()
    from_helper[0].close()
    return sent


def test_a_helper_reads_the_memo_table_file(
    ctx: SynthesisContext, matmul_spec, tmp_path: Path
) -> None:
    """In a partly warm run a helper takes what the file holds instead of solving it."""
    db = tmp_path / "memo.db"
    table = open_table(db, ctx)
    try:
        synthesize(matmul_spec(4, 16, 8), ctx, table)  # the graph's product, alone
    finally:
        table.close()
    spec = spec_of(ctx, DENSE)
    reading = helper_sends(spec, ctx, db)
    blind = helper_sends(spec, ctx, None)
    assert reading and blind
    table = open_table(db, ctx, read_only=True)
    try:
        assert not [s for s, *_ in reading if table.get(s) is not MISSING]
        # without the file, the same walk solves (and sends) some of what it holds
        assert [s for s, *_ in blind if table.get(s) is not MISSING]
    finally:
        table.close()
    assert len(reading) < len(blind)


def test_no_helper_outlives_the_call(ctx: SynthesisContext, matmul_spec) -> None:
    synthesize(matmul_spec(8, 8, 8), ctx, jobs=2)
    assert multiprocessing.active_children() == []
    # also when the search finds no implementation
    tight = matmul_spec(16, 16, 16)
    tight = attrs.evolve(tight, limits=tuple(0 for _ in tight.limits))
    with pytest.raises(NoImplementationError):
        synthesize(tight, ctx, jobs=2)
    assert multiprocessing.active_children() == []


def test_cli_jobs(tmp_path: Path) -> None:
    spec = tmp_path / "mm.lark"
    spec.write_text(
        "func mm(a: f32[8, 16], b: f32[16, 8]) -> c: f32[8, 8] {\n    c = matmul(a, b)\n}\n"
    )
    run = [sys.executable, "-m", "morello", "--target", "zen1", "--no-db", str(spec)]
    alone = subprocess.run([*run, "--jobs", "1"], capture_output=True, text=True, check=True)
    helped = subprocess.run(
        [*run, "-j", "2", "--stats"], capture_output=True, text=True, check=True
    )
    assert helped.stdout == alone.stdout
    assert "taken from helpers" in helped.stderr
    bad = subprocess.run([*run, "--jobs", "0"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "--jobs" in bad.stderr and "Traceback" not in bad.stderr


def test_no_helpers_where_a_threaded_library_is_loaded(
    ctx: SynthesisContext, matmul_spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "_THREADED_LIBRARIES", ("jax",))
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    assert not parallel.can_fork()
    impl, stats = synthesize(matmul_spec(8, 16, 8), ctx, jobs=2)
    assert stats.specs_taken_in == 0
    assert impl == synthesize(matmul_spec(8, 16, 8), ctx)[0]


def _synthesize_with_helpers(target: str, text: str, db: str) -> tuple[int, int]:
    """``synthesize(..., jobs=2)`` of the one function in ``text`` (in a pool's worker)."""
    ctx = make_context(target)
    prog = build_program(parse_spec_file("pooled.lark", text).funcs[0], ctx)
    with contextlib.closing(open_table(db, ctx)) as memo:
        impl, stats = synthesize(prog.spec, ctx, memo, jobs=2)
    return impl.cost, stats.specs_taken_in


def test_no_helpers_from_a_pools_worker(ctx: SynthesisContext, tmp_path: Path) -> None:
    # A pool's workers are daemons, which may not start processes: the walk runs alone there.
    text = "func f(a: f32[8, 16], b: f32[16, 8]) -> c: f32[8, 8] {\n    c = matmul(a, b)\n}\n"
    args = (ctx.target.name, text, str(tmp_path / "memo.db"))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        cost, taken_in = pool.apply(_synthesize_with_helpers, args)
    prog = build_program(parse_spec_file("pooled.lark", text).funcs[0], ctx)
    assert (cost, taken_in) == (synthesize(prog.spec, ctx)[0].cost, 0)


def test_ctrl_c_stops_every_walk_and_keeps_what_was_solved(tmp_path: Path) -> None:
    db = tmp_path / "memo.db"
    examples = Path(__file__).resolve().parents[2] / "examples"
    command = [sys.executable, "-m", "morello", "--target", "zen1", "--db", str(db), "-j", "2"]
    run = subprocess.Popen(
        [*command, str(examples / "attention.lark")],  # 15 s or more, cold
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        # a shell's background job (a CI script's) inherits SIGINT ignored: not this one
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3)
    assert run.poll() is None, "the synthesis ended before it could be interrupted"
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    assert err.strip() == "morello: interrupted"
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # no helper left in the group
        os.killpg(run.pid, 0)
    stats = subprocess.run(
        [sys.executable, "-m", "morello", "db", "stats", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(stats.stdout)["solved"] > 0
