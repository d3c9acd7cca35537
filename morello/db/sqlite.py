"""SQLite persistence of the memo table: transactional, shared safely between processes.

One file holds one target's boxes. Rows are grouped in *namespaces*: a fingerprint of the
engine version, the target, its cost coefficients and the text of every enabled rule file,
so that results found under other rules are never read back. A save deletes the boxes that
were merged away and inserts the new ones in one ``BEGIN IMMEDIATE`` transaction (WAL mode):
a process killed mid-run leaves the last committed state, and concurrent writers queue on the
lock. Boxes never contradict each other, so interleaved saves stay consistent.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from morello import __version__
from morello.db.boxes import Box
from morello.db.table import MemoTable, key_from_text, key_text, value_from_text, value_text
from morello.errors import MemoTableError

if TYPE_CHECKING:
    from morello.context import SynthesisContext

#: 4: a size that is not 2^k or 3 * 2^k is a family (its odd part) in the key and a
#: coordinate (its power of two) in the point; 3 held the size itself in the key.
FORMAT_VERSION: Final = 4
_BUSY_TIMEOUT_S: Final = 120.0

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tables (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    UNIQUE (ns, key)
);
CREATE TABLE IF NOT EXISTS boxes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id INTEGER NOT NULL REFERENCES tables (id),
    lo TEXT NOT NULL,
    hi TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS boxes_table ON boxes (table_id);
"""


def default_db_path(target_name: str) -> Path:
    """``$XDG_CACHE_HOME/morello/<target>-v<format>.sqlite3`` (``~/.cache`` when unset).

    The format is part of the name, so a newer Morello starts a new default file instead of
    refusing the old one (files given with ``--db`` are refused if their format differs).
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "morello" / f"{target_name}-v{FORMAT_VERSION}.sqlite3"


#: Raised whenever the actions the engine offers change meaning for the same rules (so that
#: answers found before are not reused): 2 = vector-register tiles must be whole registers;
#: 3 = temporaries laid out like the output, no tiling across a reduction inside an op.
SEARCH_REVISION: Final = 3


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
        raise MemoTableError(f"cannot open memo table {path}: {exc}") from None
    # Two processes opening a new file at once may find it locked while the other switches it
    # to WAL or creates the tables (SQLite reports that at once, without waiting): try again.
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            _set_up(conn, path, create)
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


def _close_with(conn: sqlite3.Connection, path: Path, exc: Exception) -> NoReturn:
    conn.close()
    if isinstance(exc, MemoTableError):
        raise exc
    raise MemoTableError(
        f"memo table {path} is damaged or not a database ({exc}); {_hint(path)}"
    ) from None


def _set_up(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    """Switch to WAL, check the format, create the tables (if ``create``), check they exist."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    existing = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" in existing:
        row = conn.execute("SELECT v FROM meta WHERE k = 'format'").fetchone()
        if row is not None and row[0] != str(FORMAT_VERSION):
            raise MemoTableError(
                f"memo table {path} has format {row[0]}, this Morello reads format "
                f"{FORMAT_VERSION}; {_hint(path)}"
            )
    if create:
        conn.executescript(_SCHEMA)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"meta", "tables", "boxes"} <= tables:
        raise MemoTableError(f"{path} is not a Morello memo table; {_hint(path)}")


class SqliteStore:
    """Persists a MemoTable's boxes in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, ctx: SynthesisContext) -> None:
        self.path = Path(path)
        self.ns = fingerprint(ctx)
        self.conn = connect(self.path, create=True)
        self._stamp(ctx.target.name)

    def _stamp(self, target: str) -> None:
        with self._transaction(f"memo table {self.path} is damaged"):
            meta = dict(self.conn.execute("SELECT k, v FROM meta").fetchall())
            if not meta:
                self.conn.executemany(
                    "INSERT INTO meta (k, v) VALUES (?, ?)",
                    [("format", str(FORMAT_VERSION)), ("target", target)],
                )
        if meta and meta.get("format") != str(FORMAT_VERSION):
            raise MemoTableError(
                f"memo table {self.path} has format {meta.get('format')}, this Morello "
                f"reads format {FORMAT_VERSION}; {_hint(self.path)}"
            )
        if meta and meta.get("target") != target:
            raise MemoTableError(
                f"memo table {self.path} belongs to target {meta.get('target')!r}, "
                f"not {target!r}; {_hint(self.path)}"
            )

    @contextlib.contextmanager
    def _transaction(self, failure: str) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a database error becomes ``failure (why)``."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            yield
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise MemoTableError(f"{failure} ({exc}); {_hint(self.path)}") from None

    def load(self, table: MemoTable) -> None:
        """Read every box of this namespace into ``table``."""
        try:
            rows = self.conn.execute(
                "SELECT boxes.id, tables.key, lo, hi, value FROM boxes "
                "JOIN tables ON boxes.table_id = tables.id WHERE tables.ns = ? ORDER BY boxes.id",
                (self.ns,),
            ).fetchall()
            for row_id, key, lo, hi, value in rows:
                box = Box(tuple(json.loads(lo)), tuple(json.loads(hi)), value_from_text(value))
                box.db_id = row_id
                table.table(key_from_text(key)).load(box)
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:
            raise MemoTableError(
                f"memo table {self.path} is damaged ({exc}); {_hint(self.path)}"
            ) from None

    def save(self, table: MemoTable) -> None:
        """Write boxes added and removed since the last save, in one transaction."""
        removed: list[int] = []
        added: list[tuple[Any, Box]] = []
        for key, bt in table.tables.items():
            removed.extend(b.db_id for b in bt.removed if b.db_id is not None)
            added.extend((key, b) for b in bt.boxes if b.db_id is None)
        if not removed and not added:
            return
        ids: list[int] = []
        table_ids: dict[str, int] = {}
        with self._transaction(f"cannot write memo table {self.path}"):
            self.conn.executemany("DELETE FROM boxes WHERE id = ?", [(i,) for i in removed])
            for key, box in added:
                text = key_text(key)
                if text not in table_ids:
                    self.conn.execute(
                        "INSERT OR IGNORE INTO tables (ns, key) VALUES (?, ?)", (self.ns, text)
                    )
                    table_ids[text] = self.conn.execute(
                        "SELECT id FROM tables WHERE ns = ? AND key = ?", (self.ns, text)
                    ).fetchone()[0]
                cur = self.conn.execute(
                    "INSERT INTO boxes (table_id, lo, hi, value) VALUES (?, ?, ?, ?)",
                    (table_ids[text], _compact(box.lo), _compact(box.hi), value_text(box.value)),
                )
                ids.append(cur.lastrowid)  # type: ignore[arg-type]
        for (_, box), row_id in zip(added, ids, strict=True):
            box.db_id = row_id
        for bt in table.tables.values():
            bt.removed.clear()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def file_stats(path: Path) -> dict[str, Any]:
    """Tables, boxes, points covered and size of a memo-table file."""
    conn = connect(path, create=False)
    try:
        meta = dict(conn.execute("SELECT k, v FROM meta").fetchall())
        boxes = tables = points = 0
        namespaces = set()
        keys = set()
        for ns, key_id, lo, hi in conn.execute(
            "SELECT tables.ns, boxes.table_id, lo, hi FROM boxes "
            "JOIN tables ON boxes.table_id = tables.id"
        ):
            boxes += 1
            namespaces.add(ns)
            keys.add(key_id)
            vol = 1
            for a, b in zip(json.loads(lo), json.loads(hi), strict=True):
                vol *= b - a + 1
            points += vol
        tables = len(keys)
    except (sqlite3.DatabaseError, ValueError) as exc:
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
        "points": points,
        "bytes": size,
    }


def _compact(point: tuple[int, ...]) -> str:
    return json.dumps(point, separators=(",", ":"))


def open_table(path: str | Path | None, ctx: SynthesisContext) -> MemoTable:
    """A MemoTable persisted at ``path`` (None: in memory only)."""
    if path is None:
        return MemoTable(ctx)
    return MemoTable(ctx, SqliteStore(path, ctx))
