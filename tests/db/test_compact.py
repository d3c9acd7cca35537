"""The compact memo-table file: its encoding, lazy reads, merged writers, saves as it goes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stored import wait_until_stored

from morello.context import SynthesisContext, make_context
from morello.db import sqlite as sqlite_store
from morello.db.boxes import Box
from morello.db.sqlite import decode_boxes, decode_row, encode_boxes, file_stats, open_table
from morello.db.table import MISSING, Decided, Stored, unpack_batch
from morello.errors import MemoTableError
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize
from morello.spec import Spec

SPEC = "func mm(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{ c = matmul(a, b) }}"


@pytest.fixture(scope="module")
def ctx() -> SynthesisContext:
    return make_context("zen1")


def _spec(ctx: SynthesisContext, m: int, k: int, n: int) -> Spec:
    (func,) = parse_spec_file("mm.lark", SPEC.format(m=m, k=k, n=n)).funcs
    return build_program(func, ctx).spec


@given(
    st.integers(1, 6).flatmap(
        lambda d: st.lists(
            st.tuples(
                st.lists(st.integers(0, 70_000), min_size=d, max_size=d),
                st.lists(st.integers(0, 300), min_size=d, max_size=d),
                st.integers(0, 2**32 - 1),
            ),
            max_size=40,
        ).map(lambda rows: (d, rows))
    )
)
def test_encoded_boxes_decode_to_the_same_boxes(data: tuple[int, list]) -> None:  # type: ignore[type-arg]
    ndim, rows = data
    boxes = [
        Box(tuple(lo), tuple(a + e for a, e in zip(lo, ext, strict=True)), None)
        for lo, ext, _ in rows
    ]
    ids = [i for _, _, i in rows]
    corners, got_ids = decode_boxes(encode_boxes(boxes, ids, ndim))
    assert corners == [(b.lo, b.hi) for b in boxes]
    assert got_ids == ids


def test_a_row_of_several_chunks_decodes_to_every_chunks_boxes() -> None:
    one = [Box((0, 1), (2, 3), None), Box((5, 5), (5, 9), None)]
    two = [Box((1, 1), (1, 1), None)]
    row = encode_boxes(one, [7, 0], 2) + encode_boxes(two, [3], 2)
    corners, ids, chunks = decode_row(row)
    assert corners == [((0, 1), (2, 3)), ((5, 5), (5, 9)), ((1, 1), (1, 1))]
    assert ids == [7, 0, 3] and chunks == 2
    with pytest.raises(ValueError, match="ends inside a chunk"):
        decode_boxes(row[:-3])


def _rows(db: Path) -> dict[int, bytes]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT id, boxes FROM tables").fetchall())


def test_a_save_appends_what_was_added_and_the_last_save_rewrites_each_row_whole(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    a, b = _spec(ctx, 4, 4, 4), _spec(ctx, 4, 16, 4)  # one table key, other sizes
    table = open_table(db, ctx)
    synthesize(a, ctx, table)
    table.flush()
    before = _rows(db)
    synthesize(b, ctx, table)
    table.flush()
    after = _rows(db)
    appended = [i for i, blob in after.items() if i in before and blob != before[i]]
    assert appended
    for i in appended:  # the old bytes stay; the new boxes follow as one more chunk
        assert after[i].startswith(before[i])
        assert decode_row(after[i])[2] == decode_row(before[i])[2] + 1
    reader = open_table(db, ctx, read_only=True)  # chunks answer like one row
    for spec in (a, b):
        assert synthesize(spec, ctx, reader)[1].specs_visited == 0
    reader.close()
    table.close()  # the end of a run: every row one chunk of merged boxes
    assert all(decode_row(blob)[2] == 1 for blob in _rows(db).values())
    warm = open_table(db, ctx)
    for spec in (a, b):
        assert synthesize(spec, ctx, warm)[1].specs_visited == 0
    warm.close()


def test_a_row_of_many_chunks_is_rewritten_whole(
    tmp_path: Path, ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_MAX_CHUNKS", 2)
    db = tmp_path / "memo.sqlite3"
    table = open_table(db, ctx)
    for k in (4, 8, 16, 32):  # one table key, more sizes at each save
        synthesize(_spec(ctx, 4, k, 4), ctx, table)
        table.flush()
        assert max(decode_row(blob)[2] for blob in _rows(db).values()) <= 2
    table.release()
    assert all(decode_row(blob)[2] == 1 for blob in _rows(db).values())
    for k in (4, 8, 16, 32):
        assert synthesize(_spec(ctx, 4, k, 4), ctx, table)[1].specs_visited == 0
    table.close()


def test_a_warm_read_writes_nothing_and_reads_only_the_keys_it_needs(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    table = open_table(db, ctx)
    synthesize(_spec(ctx, 8, 8, 8), ctx, table)
    synthesize(_spec(ctx, 2, 4, 2), ctx, table)
    stored = len(table.tables)
    table.close()
    before = db.read_bytes()
    with sqlite3.connect(db) as conn:
        version = conn.execute("PRAGMA data_version").fetchone()
    warm = open_table(db, ctx)
    _impl, stats = synthesize(_spec(ctx, 2, 4, 2), ctx, warm)
    assert stats.specs_visited == 0
    assert 0 < len(warm.tables) < stored  # only the keys this Spec's tree needed were read
    warm.close()
    assert db.read_bytes() == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA data_version").fetchone() == version
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_two_tables_writing_one_key_keep_each_others_boxes(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    one, two = open_table(db, ctx), open_table(db, ctx)
    a, b = _spec(ctx, 4, 4, 4), _spec(ctx, 8, 8, 8)
    synthesize(a, ctx, one)  # both read the (empty) keys before either writes
    synthesize(b, ctx, two)
    one.close()
    two.close()
    fresh = open_table(db, ctx)
    assert isinstance(fresh.get(a), Decided)
    assert isinstance(fresh.get(b), Decided)
    for spec in (a, b):
        assert synthesize(spec, ctx, fresh)[1].specs_visited == 0
    fresh.close()


def test_stored_decisions_give_the_cost_the_search_found(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    specs = [_spec(ctx, m, k, n) for m, k, n in [(4, 8, 16), (3, 5, 7), (12, 16, 8)]]
    table = open_table(db, ctx)
    cold = [synthesize(s, ctx, table)[0] for s in specs]
    table.close()
    warm = open_table(db, ctx)
    for spec, impl in zip(specs, cold, strict=True):
        again, stats = synthesize(spec, ctx, warm)
        assert stats.specs_visited == 0
        assert [(n.spec, n.action, n.cost, n.peaks) for n in again.walk()] == [
            (n.spec, n.action, n.cost, n.peaks) for n in impl.walk()
        ]
    assert warm.get(_spec(ctx, 64, 64, 64)) is MISSING
    warm.close()


def test_db_stats_measures_bytes_per_solved_spec(
    tmp_path: Path, ctx: SynthesisContext, capsys: pytest.CaptureFixture[str]
) -> None:
    from morello.cli import main

    db = tmp_path / "memo.sqlite3"
    table = open_table(db, ctx)
    _impl, stats = synthesize(_spec(ctx, 16, 16, 16), ctx, table)
    table.close()
    fs = file_stats(db)
    assert fs["solved"] == stats.specs_visited
    assert fs["bytes_per_solved"] == fs["bytes"] / fs["solved"]
    assert fs["pickled_dict_bytes"] > fs["bytes"]
    assert fs["decisions"] < fs["boxes"] <= fs["solved"]
    assert main(["db", "stats", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"solved Specs      {fs['solved']}" in out
    assert "per solved Spec" in out and "x the file)" in out


_SYNTHESIZE = """\
import sys
from morello.context import make_context
from morello.db.sqlite import open_table
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize
ctx = make_context("zen1")
(func,) = parse_spec_file("mm.lark", sys.argv[2]).funcs
table = open_table(sys.argv[1], ctx, flush_every=0.5)
print("start", flush=True)
synthesize(build_program(func, ctx).spec, ctx, table)
table.close()
print("done", flush=True)
"""


@pytest.mark.slow
def test_a_killed_synthesis_keeps_what_it_solved_and_resuming_finishes(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    text = SPEC.format(m=64, k=64, n=64)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SYNTHESIZE, str(db), text], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "start\n"
    wait_until_stored(db, 100, proc)  # saved every half second
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    kept = file_stats(db)
    assert kept["solved"] > 100, kept
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    spec = _spec(ctx, 64, 64, 64)
    cold_impl, cold = synthesize(spec, ctx, None)
    table = open_table(db, ctx)
    resumed_impl, resumed = synthesize(spec, ctx, table)
    table.close()
    assert resumed.specs_visited < cold.specs_visited
    assert resumed_impl.cost == cold_impl.cost


def test_release_lets_go_of_a_functions_state_and_reads_it_again(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    table = open_table(db, ctx)
    spec = _spec(ctx, 8, 4, 8)
    impl, _ = synthesize(spec, ctx, table)
    assert table.solutions and table.tables
    table.release()  # what the command line does after each function
    assert table.solutions == {} and table.tables == {}
    again, stats = synthesize(spec, ctx, table)
    assert stats.specs_visited == 0 and again.cost == impl.cost
    table.close()


def test_a_damaged_row_is_a_clear_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from morello.cli import main

    spec = tmp_path / "mm.lark"
    spec.write_text(SPEC.format(m=2, k=2, n=2), encoding="utf-8")
    db = tmp_path / "memo.sqlite3"
    assert main(["-t", "zen1", str(spec), "--db", str(db), "-o", str(tmp_path / "mm")]) == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tables SET boxes = x'0badc0de'")
    capsys.readouterr()
    code = main(["-t", "zen1", str(spec), "--db", str(db), "-o", str(tmp_path / "mm")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"morello: error: memo table {db} is damaged (")
    assert err.strip().endswith("to start fresh") and len(err.strip().splitlines()) == 1


def test_a_read_only_table_reads_a_changed_key_again_on_a_miss(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    a, b = _spec(ctx, 4, 4, 4), _spec(ctx, 4, 8, 4)  # one table key, other sizes
    writer = open_table(db, ctx)
    synthesize(a, ctx, writer)
    writer.flush()
    reader = open_table(db, ctx, read_only=True)
    assert isinstance(reader.get(a), Decided) and reader.get(b) is MISSING
    synthesize(b, ctx, writer)
    writer.close()
    assert reader.get(b) is MISSING  # not yet told
    assert reader.refresh() >= 1
    assert isinstance(reader.get(a), Decided)  # a hit: answered from memory
    assert isinstance(reader.get(b), Decided)  # a miss in a changed key: read again
    reader.flush()  # a read-only table writes nothing
    assert reader.collect()[1:] == (0, 0)  # nothing solved, nothing to send
    reader.close()


def test_a_worker_takes_in_the_solutions_another_worker_sent_with_their_costs(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    """Two precompute workers (read-only tables) and their writer: what one solved reaches
    the other at its next refresh, with costs, so the other expands nothing and resolves
    nothing from the file; a worker is not sent its own solutions back."""
    db = tmp_path / "memo.sqlite3"
    writer = open_table(db, ctx)
    writer.flush()
    one = open_table(db, ctx, read_only=True)
    two = open_table(db, ctx, read_only=True)
    spec = _spec(ctx, 4, 8, 4)
    impl, _ = synthesize(spec, ctx, one)
    batch, solved, pickled = one.collect()
    assert solved > 0 and len(batch) > pickled > 0
    writer.absorb(batch, solved, pickled, "one")
    writer.flush()
    known = len(one.solutions)
    one.refresh("one")
    assert len(one.solutions) == known  # its own, not sent back
    two.refresh("two")
    got, reach = two.solutions[spec]
    assert reach is None  # not passed on
    assert isinstance(got, Stored) and (got.cost, got.peaks) == (impl.cost, impl.peaks)
    assert len(two.solutions) == solved
    again, stats = synthesize(spec, ctx, two)
    assert stats.specs_visited == 0 and again.cost == impl.cost
    # Read from the file: only keys of Specs the first worker answered from others of the
    # same goal under more memory (never solved there, so not sent).
    assert len(two.tables) < len(one.tables) / 4, (len(two.tables), len(one.tables))
    writer.store.drop_shared()  # type: ignore[union-attr]
    three = open_table(db, ctx, read_only=True)
    three.refresh("three")
    assert three.solutions == {}
    for table in (one, two, three, writer):
        table.close()


def test_a_worker_takes_in_the_boxes_another_worker_found_before_they_are_stored(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    """A batch the writer has published but not stored reaches the other worker's copy of
    the table (for keys it has read and keys it has not), and is not sent back by it."""
    db = tmp_path / "memo.sqlite3"
    writer = open_table(db, ctx)
    writer.flush()
    one = open_table(db, ctx, read_only=True)
    two = open_table(db, ctx, read_only=True)
    spec, other = _spec(ctx, 4, 8, 4), _spec(ctx, 4, 4, 4)
    assert two.get(other) is MISSING  # its key is read now, the key of ``spec`` later
    synthesize(spec, ctx, one)
    synthesize(other, ctx, one)
    batch, solved, pickled = one.collect()
    writer.absorb(batch, solved, pickled, "one")
    writer.publish()
    fresh = open_table(db, ctx, read_only=True)
    assert fresh.get(spec) is MISSING  # nothing stored yet
    two.refresh("two", reread=False)
    two.solutions.clear()  # answer from the boxes alone
    assert isinstance(two.get(spec), Decided) and isinstance(two.get(other), Decided)
    assert unpack_batch(two.collect()[0]) == ({}, {})
    for table in (one, two, fresh, writer):
        table.close()


def test_a_damaged_batch_of_shared_solutions_is_a_clear_error(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    db = tmp_path / "memo.sqlite3"
    writer = open_table(db, ctx)
    writer.store.share([("elsewhere", b"not a pickle")])  # type: ignore[union-attr]
    reader = open_table(db, ctx, read_only=True)
    with pytest.raises(MemoTableError, match=f"memo table {db} is damaged"):
        reader.refresh("here")
    for table in (reader, writer):
        table.close()


class _Stop(Exception):
    pass


def test_a_resumed_run_solves_only_what_the_table_lacks(
    tmp_path: Path, ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped after its first ``kept`` Specs, resumed, solves at most the rest: a
    stored answer tells the walk how far up the limits it holds, as solving it would have
    (without that, a resumed run solved more Specs than a cold one)."""
    from morello.db.table import MemoTable

    spec = _spec(ctx, 16, 16, 16)
    _impl, cold = synthesize(spec, ctx, None)
    kept = 100
    put = MemoTable.put

    def put_then_stop(self: MemoTable, *args: object, **kwargs: object) -> None:
        if self.puts >= kept:
            raise _Stop
        put(self, *args, **kwargs)  # type: ignore[arg-type]

    db = tmp_path / "memo.sqlite3"
    table = open_table(db, ctx)
    monkeypatch.setattr(MemoTable, "put", put_then_stop)
    with pytest.raises(_Stop):
        synthesize(spec, ctx, table)
    monkeypatch.setattr(MemoTable, "put", put)
    table.close()
    table = open_table(db, ctx)
    _impl, resumed = synthesize(spec, ctx, table)
    table.close()
    assert resumed.specs_visited <= cold.specs_visited - kept


def test_a_stored_answer_reaches_its_ceiling(ctx: SynthesisContext, tmp_path: Path) -> None:
    import attrs

    from morello.spec import NO_CEILING

    table = open_table(tmp_path / "memo.sqlite3", ctx)
    top = ctx.target.max_limits()
    spec = _spec(ctx, 4, 4, 4)
    assert spec.limits == top
    assert table.get_reach(spec) == (MISSING, None)
    # At the top limits, the answer holds under any limit a Spec can have.
    synthesize(spec, ctx, table)
    got, reach = table.get_reach(spec)
    assert isinstance(got, Decided) and reach == (NO_CEILING,) * len(top)
    # Lower down, it holds up to the ceiling it was stored with (a power of two per level).
    low = attrs.evolve(_spec(ctx, 4, 4, 8), limits=tuple(t // 8 for t in top))
    table.put(low, None, tuple(t // 2 for t in top))
    assert table.get_reach(low) == (None, tuple(t // 2 for t in top))
    table.close()
