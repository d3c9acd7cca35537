"""SQLite persistence of the memo table: compact, transactional, shared safely between processes.

One file holds one target's boxes. Rows are grouped in *namespaces*: a fingerprint of the
engine version, the target, its cost coefficients and the text of every enabled rule file,
so that results found under other rules are never read back.

Storage is compact: a table key is one row, whose id is a 64-bit hash of the namespace and
the key (the key itself is not stored), and whose ``boxes`` column is a zlib-compressed blob
of small integers, stored by column (every box's first corner on one axis, then its extents
on that axis, ..., then the decision ids), so equal and neighbouring numbers sit together; a
decision is stored once per namespace, as text, in ``decisions`` and named by its id.

Reading is lazy (a key is read the first time it is looked up) and reading writes nothing. A
save writes the rows of the keys that changed in one ``BEGIN IMMEDIATE`` transaction (WAL
mode): a process killed mid-run leaves the last committed state, concurrent writers queue on
the lock, and a writer first merges into its boxes whatever another process stored for the
same key since it read it (each row carries a revision), so no one's work is overwritten.
Boxes never contradict each other, so merged tables stay consistent.

A row's blob is one or more *chunks*, each a compressed block as above. A save that finds
the row as it left it appends the boxes made since as one more chunk (SQLite concatenates
the bytes, ``||`` cast back to a blob; nothing is decoded or encoded again), so a save
costs what changed, not the size of the tables. Chunks may overlap (a merged box covers
boxes stored before), which lookups do not mind. A row is rewritten whole, as one chunk of
merged boxes, when its chunks hold more than twice the boxes the table needs or number
``_MAX_CHUNKS``, and by the save that ends a run (``MemoTable.flush(whole=True)``), so a
finished run leaves one chunk per row.

While a precompute runs, a ``shared`` table also holds pickled batches of boxes and
solutions with their costs, which its writer passes from each worker to the others
(``SqliteStore.share``);
the precompute drops it when it ends (and when it starts, after an interrupted run).
"""

from __future__ import annotations

import contextlib
import hashlib
import operator
import os
import sqlite3
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from morello import __version__
from morello.db.boxes import Box, BoxTable, Point, Value, by_corners
from morello.db.coords import Key
from morello.db.table import (
    Batch,
    MemoTable,
    key_text,
    unpack_batch,
    value_from_text,
    value_text,
)
from morello.errors import MemoTableError, read_failure

if TYPE_CHECKING:
    from morello.context import SynthesisContext

#: 6: a row's blob is one or more chunks (a save appends what it added; see above);
#: 5: one compressed row of boxes per table key, decisions interned, no costs stored;
#: 4: a size that is not 2^k or 3 * 2^k is a family (its odd part) in the key.
FORMAT_VERSION: Final = 6
_BUSY_TIMEOUT_S: Final = 120.0
#: Chunks a row may hold before a save rewrites it whole (each lookup of a key not read yet
#: decodes them all).
_MAX_CHUNKS: Final = 32

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS namespaces (
    id INTEGER PRIMARY KEY,
    ns TEXT NOT NULL UNIQUE,
    solved INTEGER NOT NULL DEFAULT 0,
    pickled INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (ns, text)
);
CREATE TABLE IF NOT EXISTS tables (
    id INTEGER PRIMARY KEY,
    ns INTEGER NOT NULL,
    rev INTEGER NOT NULL,
    nboxes INTEGER NOT NULL,
    boxes BLOB NOT NULL
);
"""
_TABLES: Final = frozenset({"meta", "namespaces", "decisions", "tables"})
#: Batches of boxes and solutions with their costs, pickled, that a precompute's writer
#: passes from each worker to the others while it runs (``SqliteStore.share``); dropped when
#: the precompute ends.
_SHARED_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS shared (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ns TEXT NOT NULL,
    src TEXT NOT NULL,
    blob BLOB NOT NULL
)
"""


def default_db_path(target_name: str) -> Path:
    """``$XDG_CACHE_HOME/morello/<target>-v<format>.sqlite3`` (``~/.cache`` when unset).

    The format is part of the name, so a newer Morello starts a new default file instead of
    refusing the old one (files given with ``--db`` are refused if their format differs).
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "morello" / f"{target_name}-v{FORMAT_VERSION}.sqlite3"


#: Raised whenever the actions the engine offers, or the cost its model gives a tree, change
#: for the same rules and coefficients (so that answers found before are not reused):
#: 2 = vector-register tiles must be whole registers; 3 = temporaries laid out like the
#: output, no tiling across a reduction inside an op; 4 = no tile narrower than a packed
#: block unless it divides the block; 5 = a loop reading one short run of each row per trip
#: pays a strided walk's price for its lines; 6 = an unrolled loop pays once for the reads
#: of inputs it does not run along; 7 = a loop across the runs of a tile few enough to be
#: streams together pays no restarts; 8 = an input moved into a level small enough to fold
#: pays its lines, not its copy kernel's instruction; 9 = a loop pays once for the residencies
#: its steps start with, of operands it does not run along.
SEARCH_REVISION: Final = 9


def fingerprint(ctx: SynthesisContext) -> str:
    """Namespace of a context: changes whenever rules, schemas, target or coefficients do."""
    h = hashlib.sha256()
    h.update(f"morello {__version__} format {FORMAT_VERSION} search {SEARCH_REVISION}\n".encode())
    for name, schema in sorted(ctx.schemas.items()):
        h.update(f"schema {name} {type(schema).__module__}.{type(schema).__qualname__}\n".encode())
    for name in sorted(ctx.size_policies):
        h.update(f"sizes {name}\n".encode())
    h.update(repr(ctx.target).encode())
    h.update(repr(ctx.coefficients).encode())
    for path in ctx.ruleset.files:
        try:
            h.update(Path(path).read_bytes())
        except OSError:
            h.update(path.encode())
    return h.hexdigest()[:32]


def _hint(path: Path) -> str:
    return f"delete {path} or pass --db with another file (or --no-db) to start fresh"


def connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """Open (and, if ``create``, initialize) a memo-table file; MemoTableError if unusable."""
    if not create and not path.exists():
        raise MemoTableError(f"memo table {path} does not exist")
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, OSError):
            where = f" ({exc.filename})" if exc.filename else ""
            raise MemoTableError(
                f"cannot open memo table {path}: {read_failure(exc)}{where}"
            ) from None
        raise MemoTableError(f"cannot open memo table {path}: {exc}") from None
    # Two processes opening a new file at once may find it locked while the other switches it
    # to WAL or creates the tables (SQLite reports that at once, without waiting): try again.
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            _set_up(conn, path, create)
            conn.execute("PRAGMA synchronous=NORMAL")  # a killed process loses nothing committed
            return conn
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                _close_with(conn, path, exc)
            if time.monotonic() > deadline:
                conn.close()
                raise MemoTableError(
                    f"memo table {path} stayed locked by another process for "
                    f"{_BUSY_TIMEOUT_S:.0f} s ({exc})"
                ) from None
            time.sleep(0.05)
        except (MemoTableError, sqlite3.DatabaseError) as exc:
            _close_with(conn, path, exc)


_SQLITE_HEADER: Final = b"SQLite format 3\x00"


def _not_ours(path: Path, what: str) -> MemoTableError:
    """The error for a file that is not a memo table: it may be the user's, so no advice to
    delete it (``_hint``), only to pass another file."""
    return MemoTableError(
        f"{path} is not a Morello memo table ({what}); it was left unchanged: pass --db "
        "with another file (or --no-db)"
    )


def _close_with(conn: sqlite3.Connection, path: Path, exc: Exception) -> NoReturn:
    conn.close()
    if isinstance(exc, MemoTableError):
        raise exc
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError:
        header = _SQLITE_HEADER
    if header and header != _SQLITE_HEADER:  # empty: SQLite's new database
        raise _not_ours(path, "not an SQLite file") from None
    raise MemoTableError(
        f"memo table {path} is damaged or not a database ({exc}); {_hint(path)}"
    ) from None


def _set_up(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    """Check the format; if the tables are missing and ``create``, switch to WAL and make them.

    A file that already has its tables is only read here, so a run that finds every answer
    in the table writes nothing.
    """
    existing = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if existing and not existing & _TABLES:
        # Another program's database: adding our tables to it would change the user's file.
        raise _not_ours(path, f"an SQLite database of other tables: {', '.join(sorted(existing))}")
    if "meta" in existing:
        row = conn.execute("SELECT v FROM meta WHERE k = 'format'").fetchone()
        if row is not None and row[0] != str(FORMAT_VERSION):
            raise MemoTableError(
                f"memo table {path} has format {row[0]}, this Morello reads format "
                f"{FORMAT_VERSION}; {_hint(path)}"
            )
    if existing >= _TABLES:
        return
    if create:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables >= _TABLES:
        raise MemoTableError(f"{path} is not a Morello memo table; {_hint(path)}")


def encode_boxes(boxes: list[Box], ids: list[int], ndim: int) -> bytes:
    """The blob of a key's boxes: a header, then columns of small integers, compressed."""
    n = len(boxes)
    coords: list[int] = []
    if boxes:
        lo_cols = list(zip(*(b.lo for b in boxes), strict=True))  # one tuple per axis
        hi_cols = list(zip(*(b.hi for b in boxes), strict=True))
        for axis in range(ndim):
            coords.extend(lo_cols[axis])
            coords.extend(map(operator.sub, hi_cols[axis], lo_cols[axis]))
    top = max(coords, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "I"
    cols = array(code, coords)
    idcol = array("I", ids)
    if sys.byteorder == "big":
        cols.byteswap()
        idcol.byteswap()
    raw = struct.pack("<cHI", code.encode(), ndim, n) + cols.tobytes() + idcol.tobytes()
    return zlib.compress(raw, 9)


def decode_boxes(blob: bytes) -> tuple[list[tuple[Point, Point]], list[int]]:
    """Inverse of ``encode_boxes``, over every chunk of a row (``encode_boxes`` outputs one
    after another): the boxes' corners and their decision ids."""
    corners, ids, _ = decode_row(blob)
    return corners, ids


def decode_row(blob: bytes) -> tuple[list[tuple[Point, Point]], list[int], int]:
    """``decode_boxes``, and the number of chunks."""
    corners: list[tuple[Point, Point]] = []
    ids: list[int] = []
    rest, chunks = blob, 0
    while True:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(rest)
        if not inflate.eof:
            raise ValueError("a row of boxes ends inside a chunk")
        got_corners, got_ids = _decode_chunk(raw)
        corners += got_corners
        ids += got_ids
        chunks += 1
        rest = inflate.unused_data
        if not rest:
            return corners, ids, chunks


def _decode_chunk(raw: bytes) -> tuple[list[tuple[Point, Point]], list[int]]:
    head = struct.calcsize("<cHI")
    code_b, ndim, n = struct.unpack_from("<cHI", raw)
    code = code_b.decode()
    cols = array(code)
    width = cols.itemsize * 2 * ndim * n
    cols.frombytes(raw[head : head + width])
    idcol = array("I")
    idcol.frombytes(raw[head + width :])
    if sys.byteorder == "big":
        cols.byteswap()
        idcol.byteswap()
    if len(idcol) != n:
        raise ValueError(f"a row of {n} boxes holds {len(idcol)} decisions")
    if ndim == 0:
        return [((), ())] * n, list(idcol)
    # Whole columns at a time (C loops): each axis's first corners, then the last corners as
    # first corner plus extent; zip turns the columns back into one point per box.
    los = [cols[2 * axis * n : (2 * axis + 1) * n] for axis in range(ndim)]
    his = [
        list(map(operator.add, lo, cols[(2 * axis + 1) * n : (2 * axis + 2) * n]))
        for axis, lo in enumerate(los)
    ]
    points = zip(zip(*los, strict=True), zip(*his, strict=True), strict=True)
    return list(points), list(idcol)


class SqliteStore:
    """Persists a MemoTable's boxes in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, ctx: SynthesisContext) -> None:
        self.path = Path(path)
        self.ns = fingerprint(ctx)
        self.conn = connect(self.path, create=True)
        self._check_stamp(ctx.target.name)
        self._ns_id: int | None = None
        self._row_ids: dict[Key, int] = {}
        self._ids: dict[Value, int] = {}  # decision -> id
        self._values: dict[int, Value] = {0: None}  # id -> decision (0: no implementation)

    def _check_stamp(self, target: str) -> None:
        try:
            meta = dict(self.conn.execute("SELECT k, v FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise self._damaged(exc) from None
        if not meta:
            with self._transaction(f"cannot write memo table {self.path}"):
                self.conn.executemany(
                    "INSERT OR IGNORE INTO meta (k, v) VALUES (?, ?)",
                    [("format", str(FORMAT_VERSION)), ("target", target)],
                )
            meta = dict(self.conn.execute("SELECT k, v FROM meta").fetchall())
        if meta.get("format") != str(FORMAT_VERSION):
            raise MemoTableError(
                f"memo table {self.path} has format {meta.get('format')}, this Morello "
                f"reads format {FORMAT_VERSION}; {_hint(self.path)}"
            )
        if meta.get("target") != target:
            raise MemoTableError(
                f"memo table {self.path} belongs to target {meta.get('target')!r}, "
                f"not {target!r}; {_hint(self.path)}"
            )

    @contextlib.contextmanager
    def _transaction(self, failure: str) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a database error becomes ``failure (why)``.

        Any other exception (a bug, or an interrupt) rolls the transaction back too and
        propagates as it is: left open, the transaction would make the next one fail with
        SQLite's "cannot start a transaction within a transaction", hiding the first error.
        """
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            yield
            self.conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            # Ids handed out in the rolled-back transaction do not exist: forget them all.
            self._ids.clear()
            self._values = {0: None}
            self._ns_id = None
            if isinstance(exc, sqlite3.DatabaseError):
                raise MemoTableError(f"{failure} ({exc}); {_hint(self.path)}") from None
            raise

    def _damaged(self, exc: Exception) -> MemoTableError:
        return MemoTableError(f"memo table {self.path} is damaged ({exc}); {_hint(self.path)}")

    def _read_row(self, key: Key) -> tuple[int, list[tuple[Point, Point, Value]], int] | None:
        """The revision, boxes and number of chunks stored for ``key``, or None."""
        try:
            row = self.conn.execute(
                "SELECT rev, boxes FROM tables WHERE id = ?", (self._row_id(key),)
            ).fetchone()
            if row is None:
                return None
            corners, ids, chunks = decode_row(row[1])
            missing = sorted({i for i in ids if i not in self._values})
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for i, text in self.conn.execute(
                    f"SELECT id, text FROM decisions WHERE id IN ({marks})", chunk
                ):
                    self._values[i] = value = value_from_text(text)
                    self._ids[value] = i
            boxes = [(lo, hi, self._values[i]) for (lo, hi), i in zip(corners, ids, strict=True)]
            return row[0], boxes, chunks
        except (sqlite3.DatabaseError, zlib.error, struct.error, ValueError, KeyError) as exc:
            raise self._damaged(exc) from None

    def _row_id(self, key: Key) -> int:
        got = self._row_ids.get(key)
        if got is None:
            digest = hashlib.sha256(f"{self.ns}\n{key_text(key)}".encode()).digest()
            got = self._row_ids[key] = int.from_bytes(digest[:8], "little", signed=True)
        return got

    def _namespace_id(self) -> int:
        """The id of this namespace's row (made in the current write transaction if new)."""
        if self._ns_id is None:
            self.conn.execute("INSERT OR IGNORE INTO namespaces (ns) VALUES (?)", (self.ns,))
            self._ns_id = self.conn.execute(
                "SELECT id FROM namespaces WHERE ns = ?", (self.ns,)
            ).fetchone()[0]
        return self._ns_id

    def load_key(self, key: Key, table: BoxTable) -> None:
        """Add the stored boxes of ``key`` to ``table`` (nothing if none are stored)."""
        got = self._read_row(key)
        if got is None:
            return
        table.rev, boxes, table.chunks = got
        for lo, hi, value in boxes:
            table.load(Box(lo, hi, value))

    def changed_keys(self, memo: MemoTable) -> list[Key]:
        """The keys of ``memo``'s box tables that were stored since they were read."""
        try:
            revs = dict(self.conn.execute("SELECT id, rev FROM tables").fetchall())
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        return [k for k, t in memo.tables.items() if revs.get(self._row_id(k), 0) != t.rev]

    def share(self, batches: list[tuple[str, bytes]]) -> None:
        """Keep pickled batches (``MemoTable.collect``) for the other readers of the file (a
        precompute's workers), in the ``shared`` table, which ``drop_shared`` removes;
        tagged with their source and this namespace."""
        with self._transaction(f"cannot write memo table {self.path}"):
            self.conn.execute(_SHARED_SCHEMA)
            self.conn.executemany(
                "INSERT INTO shared (ns, src, blob) VALUES (?, ?, ?)",
                [(self.ns, source, blob) for source, blob in batches],
            )

    def shared(self, after: int, source: str) -> tuple[int, list[Batch]]:
        """The batches of this namespace kept after number ``after`` by sources other than
        ``source`` (unpickled; filtered in the query, so a worker never reads its own back),
        and the number of the last of them (``after`` if none)."""
        try:
            query = "SELECT seq, blob FROM shared WHERE seq > ? AND ns = ? AND src != ?"
            rows = self.conn.execute(f"{query} ORDER BY seq", (after, self.ns, source)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return after, []
            raise self._damaged(exc) from None
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        last = rows[-1][0] if rows else after
        try:
            return last, [unpack_batch(blob) for _, blob in rows]
        except Exception as exc:  # any failure to unpickle: the file is damaged
            raise self._damaged(exc) from None

    def drop_shared(self) -> None:
        """Remove the batches ``share`` kept (a precompute's, at its start and end)."""
        with self._transaction(f"cannot write memo table {self.path}"):
            self.conn.execute("DROP TABLE IF EXISTS shared")

    def _intern(self, value: Value) -> int:
        if value is None:
            return 0
        got = self._ids.get(value)
        if got is None:
            ns = self._namespace_id()
            text = value_text(value)
            self.conn.execute(
                "INSERT OR IGNORE INTO decisions (ns, text) VALUES (?, ?)", (ns, text)
            )
            got = self.conn.execute(
                "SELECT id FROM decisions WHERE ns = ? AND text = ?", (ns, text)
            ).fetchone()[0]
            self._ids[value] = got
            self._values[got] = value
        return got

    def save(
        self, memo: MemoTable, keys: list[Key], solved: int, pickled: int, *, whole: bool = False
    ) -> None:
        """Write the rows of ``keys`` in one transaction, merged with others' writes: append
        the boxes made since a row was written as one more chunk, or rewrite the row whole
        (see the module docstring); ``whole``: rewrite every row of more than one chunk."""
        written: dict[Key, tuple[int, int]] = {}  # key -> (revision, chunks)
        with self._transaction(f"cannot write memo table {self.path}"):
            for key in keys:
                table = memo.tables[key]
                row_id = self._row_id(key)
                row = self.conn.execute(
                    "SELECT rev, nboxes FROM tables WHERE id = ?", (row_id,)
                ).fetchone()
                if row is not None and row[0] == table.rev:
                    new = len(table.fresh)
                    if not new and (table.chunks <= 1 or not whole):
                        continue  # the row holds every box already
                    if not whole and table.chunks < _MAX_CHUNKS and row[1] + new <= 2 * len(table):
                        added = sorted(table.fresh, key=by_corners)
                        blob = self._encode(added)
                        self.conn.execute(
                            "UPDATE tables SET rev = ?, nboxes = nboxes + ?, "
                            "boxes = CAST(boxes || ? AS BLOB) "
                            "WHERE id = ?",
                            (row[0] + 1, new, blob, row_id),
                        )
                        written[key] = (row[0] + 1, table.chunks + 1)
                        continue
                elif row is not None:
                    got = self._read_row(key)  # another process wrote it since we read it
                    assert got is not None
                    for lo, hi, value in got[1]:
                        table.insert(lo, hi, value)
                boxes = table.sorted_boxes()
                rev = (row[0] if row is not None else 0) + 1
                self.conn.execute(
                    "INSERT OR REPLACE INTO tables (id, ns, rev, nboxes, boxes) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (row_id, self._namespace_id(), rev, len(boxes), self._encode(boxes)),
                )
                written[key] = (rev, 1)
            self.conn.execute(
                "UPDATE namespaces SET solved = solved + ?, pickled = pickled + ? WHERE id = ?",
                (solved, pickled, self._namespace_id()),
            )
        for key, (rev, chunks) in written.items():
            table = memo.tables[key]
            table.rev, table.chunks = rev, chunks
            table.fresh.clear()

    def _encode(self, boxes: list[Box]) -> bytes:
        ndim = len(boxes[0].lo) if boxes else 0
        return encode_boxes(boxes, [self._intern(b.value) for b in boxes], ndim)

    def compact(self) -> None:
        """Give the space of rewritten rows back to the file system (VACUUM)."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.conn.execute("VACUUM")
        except sqlite3.DatabaseError as exc:
            raise MemoTableError(f"cannot compact memo table {self.path} ({exc})") from None

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def file_stats(path: Path) -> dict[str, Any]:
    """What a memo-table file holds, and how compactly.

    ``solved`` counts the Specs whose actions the search compared (across every run that
    wrote the file); ``pickled_dict_bytes`` is the size of those solutions as a pickled
    Python dict of Spec -> (decision, cost, peaks), pickled in the chunks each save wrote;
    ``points`` counts the Specs the boxes answer (every memory limit included). Both
    ``boxes`` and ``points`` count what the rows hold: a row an interrupted run left in
    several chunks may hold a merged box and the boxes it covers.
    """
    conn = connect(path, create=False)
    try:
        meta = dict(conn.execute("SELECT k, v FROM meta").fetchall())
        boxes = points = 0
        namespaces: set[str] = set()
        tables = 0
        for ns, nboxes, blob in conn.execute("SELECT ns, nboxes, boxes FROM tables"):
            tables += 1
            boxes += nboxes
            namespaces.add(ns)
            corners, _ = decode_boxes(blob)
            points += sum(Box(lo, hi, None).volume() for lo, hi in corners)
        solved, pickled = conn.execute(
            "SELECT COALESCE(SUM(solved), 0), COALESCE(SUM(pickled), 0) FROM namespaces"
        ).fetchone()
        decisions = conn.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size
    except (sqlite3.DatabaseError, zlib.error, struct.error, ValueError) as exc:
        raise MemoTableError(f"memo table {path} is damaged ({exc}); {_hint(path)}") from None
    finally:
        conn.close()
    size = sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )
    return {
        "path": str(path),
        "target": meta.get("target"),
        "format": int(meta.get("format", 0)),
        "namespaces": len(namespaces),
        "tables": tables,
        "boxes": boxes,
        "decisions": decisions,
        "points": points,
        "solved": solved,
        "bytes": size,
        "free_bytes": free,
        "bytes_per_solved": size / solved if solved else None,
        "pickled_dict_bytes": pickled,
        "pickled_ratio": pickled / size if size else None,
    }


def open_table(
    path: str | Path | None,
    ctx: SynthesisContext,
    *,
    flush_every: float = 2.0,
    read_only: bool = False,
) -> MemoTable:
    """A MemoTable persisted at ``path`` (None: in memory only), saved every ``flush_every``
    seconds while it is being filled (never, if ``read_only``)."""
    if path is None:
        return MemoTable(ctx, flush_every=flush_every)
    return MemoTable(ctx, SqliteStore(path, ctx), flush_every=flush_every, read_only=read_only)
