"""The memo table: solved Specs, stored as boxes of equal decisions.

``MemoTable`` maps Specs to coordinates (``coords.py``), keeps one ``BoxTable`` per table
key, and stores for each solved Spec its *decision* (position independent: "tile n by 8",
"kernel k"), never its cost: the search recomputes a stored answer's cost and peak memory
from the decision and the children's answers, so one box can hold many sizes. A solution
found for a Spec under limits L, requiring limits R, is stored for every limit between R and
L (it is optimal and feasible there); "no implementation under L" for every limit up to L.

Persistence is delegated to a store (``sqlite.py``). Box tables are read from it lazily,
one table key at a time, the first time a Spec of that key is looked up; what the search
adds is written back in short transactions as it goes (``flush_every`` seconds), so a
killed run keeps its work. Without a store the table lives in memory.
"""

from __future__ import annotations

import functools
import json
import operator
import pickle
import time
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

from morello.db.boxes import Box, BoxTable, Value, by_corners
from morello.db.coords import Key, Point, limit_coord, limit_from_coord, spec_to_coords
from morello.spec import NO_CEILING, Spec, snap_down

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Action
    from morello.search.solve import Solution

MISSING: Final = object()


def decision_of(action: Action) -> tuple[Any, ...]:
    """What an action decides, in terms that mean the same at every Spec it applies to."""
    return action.decision()


def _jsonable(x: Any) -> Any:
    if isinstance(x, tuple | list):
        return [_jsonable(i) for i in x]
    return x


def _tupled(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tupled(i) for i in x)
    return x


@functools.lru_cache(maxsize=1 << 16)
def key_text(key: Key) -> str:
    """Stable text form of a table key (for storage; memoized, since every flush and
    collect sorts the keys it writes by it)."""
    return json.dumps(_jsonable(key), separators=(",", ":"))


def key_from_text(text: str) -> Key:
    """Inverse of ``key_text``."""
    return _tupled(json.loads(text))  # type: ignore[no-any-return]


def value_text(value: Value) -> str:
    """Stable text form of a box value."""
    return json.dumps(_jsonable(value), separators=(",", ":"))


def value_from_text(text: str) -> Value:
    """Inverse of ``value_text``."""
    return _tupled(json.loads(text))  # type: ignore[no-any-return]


@attrs.frozen
class Stored:
    """An answer known by its decision, cost and peaks (found under other limits)."""

    decision: tuple[Any, ...]
    cost: int
    peaks: tuple[int, ...]


@attrs.frozen
class Decided:
    """A stored answer: the decision only; cost and peaks follow from the children."""

    decision: tuple[Any, ...]


#: What a read-only table collected, as ``MemoTable.refresh`` takes it in: the boxes added
#: (by table key: rows of corners and decision), and the Specs solved with their decisions,
#: costs and peaks (None: no implementation).
Batch = tuple[dict[Key, list[tuple[Point, Point, Value]]], dict[Spec, Any]]


def pack_batch(boxes: dict[Key, list[tuple[Point, Point, Value]]], solutions: bytes) -> bytes:
    """One batch, pickled: the boxes, and the solutions as a pickled dict (``solutions``,
    already pickled for its size, is kept as bytes, not pickled again)."""
    return pickle.dumps((boxes, solutions), protocol=pickle.HIGHEST_PROTOCOL)


def unpack_batch(batch: bytes, *, solutions: bool = True) -> Batch:
    """The boxes and (when ``solutions``) the solutions of a packed batch."""
    boxes, blob = pickle.loads(batch)
    return boxes, (pickle.loads(blob) if solutions and blob else {})


class Store(Protocol):
    """Where a MemoTable persists its boxes."""

    def load_key(self, key: Key, table: BoxTable) -> None:
        """Add the stored boxes of ``key`` to ``table`` (and set its ``rev``)."""

    def save(
        self, memo: MemoTable, keys: list[Key], solved: int, pickled: int, *, whole: bool = False
    ) -> None:
        """Write the box tables of ``keys`` in one transaction, merged with what other
        processes stored meanwhile; count ``solved`` Specs (``pickled`` bytes as a dict).
        ``whole``: store each table as it is now, not as additions to what was stored."""

    def changed_keys(self, memo: MemoTable) -> list[Key]:
        """The keys of ``memo``'s box tables that were stored since they were read."""

    def share(self, batches: list[tuple[str, bytes]]) -> None:
        """Keep ``(source, batch)`` pairs (``MemoTable.collect``) for other readers."""

    def shared(self, after: int, source: str) -> tuple[int, list[Batch]]:
        """The batches kept since number ``after`` that ``source`` did not send (unpickled),
        and the number of the last of them."""

    def close(self) -> None:
        """Release the store."""


def _answer(box: Box) -> Decided | None:
    """A stored box's answer: its decision, or None where the Spec has no implementation."""
    return None if box.value is None else Decided(box.value)


class MemoTable:
    """Spatially compressed memo of Spec solutions for one synthesis context."""

    def __init__(
        self,
        ctx: SynthesisContext,
        store: Store | None = None,
        *,
        flush_every: float = 2.0,
        read_only: bool = False,
    ) -> None:
        """``read_only``: read from ``store`` but never write to it; what is added is taken
        out with ``collect`` (a precompute worker hands it to the one writer)."""
        self.ctx = ctx
        self.read_only = read_only
        self._top = ctx.target.max_limits()  # the root's limits: where a box's reach ends
        self._counted = (0, 0)  # Specs solved elsewhere, and their pickled bytes (``absorb``)
        self.tables: dict[Key, BoxTable] = {}
        self.store = store
        self.flush_every = flush_every
        self.puts = 0
        self._dirty: set[Key] = set()
        self._stale: set[Key] = set()  # keys stored elsewhere since they were read (refresh)
        # Solutions this process found or resolved, with their actions, costs and peaks:
        # resolving a stored decision walks its subtree, so it is done once per process.
        # Those another process found (``refresh``) are Stored: decision, cost and peaks.
        # Each with how far up the limits it holds (``get_reach``; None: not known).
        self.solutions: dict[Spec, tuple[Solution | Stored | None, tuple[int, ...] | None]] = {}
        self._unsaved: dict[Spec, Any] = {}  # solved since the last flush, for the counters
        # Coordinates of the Specs that ``get`` missed, which the search then solves and
        # ``put``s: worked out once for both (a cache, emptied at each flush).
        self._missed: dict[Spec, tuple[Key, Point]] = {}
        self._last_flush = time.monotonic()
        self._outgoing: list[tuple[str, bytes]] = []  # absorbed batches, for ``publish``
        self._shared_seen = 0  # the last shared batch read (``refresh``)
        # Boxes of shared batches for keys not read yet (``refresh``; taken in by ``table``).
        self._pending: dict[Key, list[tuple[Point, Point, Value]]] = {}

    def table(self, key: Key) -> BoxTable:
        """The box table of ``key``, read from the store the first time."""
        t = self.tables.get(key)
        if t is None:
            t = BoxTable(len(self.ctx.ruleset.ops[key[0]].index_vars))
            if self.store is not None:
                self.store.load_key(key, t)
            pending = self._pending.pop(key, None)
            if pending is not None:
                _take_in(t, pending)
            self.tables[key] = t
        return t

    def put(
        self, spec: Spec, solution: Solution | Stored | None, ceiling: tuple[int, ...] | None = None
    ) -> None:
        """Store the solution (or the absence of one) of ``spec``, which holds from its peaks
        up to ``ceiling`` (per level, at least ``spec``'s limits; None: those limits)."""
        coords = self._missed.pop(spec, None)
        key, point = coords if coords is not None else spec_to_coords(spec, self.ctx)
        nsize = len(self.ctx.ruleset.ops[spec.op].index_vars)
        if ceiling is not None and ceiling != spec.limits:
            reach = zip(ceiling, self._top, point[nsize:], strict=True)
            point = (
                *point[:nsize],
                *(max(limit_coord(snap_down(min(c, t))), p) for c, t, p in reach),
            )
        table = self.table(key)
        self.puts += 1
        self._dirty.add(key)
        self.solutions[spec] = (solution, spec.limits if ceiling is None else ceiling)
        if solution is None:
            table.insert((*point[:nsize], *(0 for _ in point[nsize:])), point, None)
            self._unsaved[spec] = None
        else:
            stored = isinstance(solution, Stored)  # another walk's answer (helper walks)
            decision = solution.decision if stored else decision_of(solution.action)
            if any(map(operator.gt, solution.peaks, spec.limits)):
                # A node kind's peaks rule is wrong: the box would run backwards.
                what = decision if stored else solution.action.describe()
                raise AssertionError(
                    f"{what} needs {solution.peaks}, more than the "
                    f"limits {spec.limits} of {spec.describe()} it was chosen under"
                )
            peaks = tuple(limit_coord(p) for p in solution.peaks)
            table.insert((*point[:nsize], *peaks), point, decision)
            self._unsaved[spec] = (decision, solution.cost, solution.peaks)
        if (
            self.store is not None
            and not self.read_only
            and time.monotonic() - self._last_flush > self.flush_every
        ):
            self.flush()

    def forget_miss(self, spec: Spec) -> None:
        """Drop what ``get`` kept of a Spec it missed that will not be ``put`` (a walk that
        only reads this table)."""
        self._missed.pop(spec, None)

    def get(self, spec: Spec) -> Decided | object | None:
        """The stored decision of ``spec``, None if it has no implementation, or ``MISSING``."""
        box = self._box(spec)
        return MISSING if box is None else _answer(box)

    def get_reach(self, spec: Spec) -> tuple[Decided | object | None, tuple[int, ...] | None]:
        """``get``, and how far up the limits the stored answer holds: the ceiling ``put``
        stored with it, rounded down to a power of two (``NO_CEILING`` where it reaches the
        target's top limit, which no Spec's limit exceeds); None when nothing is stored."""
        box = self._box(spec)
        if box is None:
            return MISSING, None
        nsize = len(box.hi) - len(self._top)
        reach = tuple(
            NO_CEILING if c >= limit_coord(t) else limit_from_coord(c)
            for c, t in zip(box.hi[nsize:], self._top, strict=True)
        )
        return _answer(box), reach

    def _box(self, spec: Spec) -> Box | None:
        """The box holding ``spec``'s point (None: nothing stored there)."""
        key, point = spec_to_coords(spec, self.ctx)
        box = self.table(key).lookup(point)
        if box is None and key in self._stale:
            self._stale.discard(key)  # others stored more under this key: read it again
            del self.tables[key]
            box = self.table(key).lookup(point)
        if box is None:
            self._missed[spec] = (key, point)
        return box

    def flush(self, *, whole: bool = False) -> None:
        """Persist what changed (a no-op without a store or without changes).

        A save appends the boxes added since a row was written to it; ``whole`` rewrites
        every row it has appended to as one chunk of merged boxes (at the end of a run)."""
        self._last_flush = time.monotonic()
        self._missed.clear()
        if self.store is None or self.read_only:
            return
        keys = set(self._dirty)
        if whole:
            keys.update(k for k, t in self.tables.items() if t.chunks > 1)
        if not keys:
            return
        solved, pickled, _ = self._counts()
        self.store.save(self, sorted(keys, key=key_text), solved, pickled, whole=whole)
        self.publish()
        self._dirty.clear()
        self._unsaved.clear()
        self._counted = (0, 0)

    def _counts(self) -> tuple[int, int, bytes]:
        """Specs solved since the last flush, their size as a pickled dict, and that dict
        (Spec -> (decision, cost, peaks), or None for no implementation) pickled."""
        solved = len(self._unsaved) + self._counted[0]
        pickled = self._counted[1]
        blob = b""
        if self._unsaved:
            blob = pickle.dumps(self._unsaved, protocol=pickle.HIGHEST_PROTOCOL)
            pickled += len(blob)
        return solved, pickled, blob

    def collect(self) -> tuple[bytes, int, int]:
        """What was added since the last ``collect``, as one batch for ``absorb``: the new
        boxes and the Specs solved with their costs (``pack_batch``); how many Specs were
        solved, and their size as a pickled dict. Forgets them (they are not written)."""
        boxes = {}
        for key in sorted(self._dirty, key=key_text):
            table = self.tables[key]
            fresh = sorted(table.fresh, key=by_corners)
            boxes[key] = [(b.lo, b.hi, b.value) for b in fresh]
            table.fresh.clear()
        solved, pickled, blob = self._counts()
        self._dirty.clear()
        self._unsaved.clear()
        self._counted = (0, 0)
        return pack_batch(boxes, blob), solved, pickled

    def absorb(self, batch: bytes, solved: int, pickled: int, source: str = "") -> None:
        """Add the boxes another table collected (and count its solved Specs); written by
        the next ``flush``. The batch is also kept, by the next ``publish``, for the other
        readers of the file (``refresh``), not for ``source``, the table that sent it."""
        self._outgoing.append((source, batch))
        boxes, _ = unpack_batch(batch, solutions=False)
        for key, rows in boxes.items():
            table = self.table(key)
            for lo, hi, value in rows:
                table.insert(lo, hi, value)
            self._dirty.add(key)
        self._counted = (self._counted[0] + solved, self._counted[1] + pickled)

    def publish(self) -> None:
        """Keep the batches absorbed since the last publish for the other readers of the
        file, in one short transaction (``flush`` does it too)."""
        if self.store is not None and self._outgoing:
            self.store.share(self._outgoing)
            self._outgoing = []

    def refresh(self, source: str = "", *, reread: bool = True) -> int:
        """Take in the batches the writer kept from tables other than ``source``
        (``absorb``, ``publish``): their boxes join this table's, and their solutions, with
        costs, are known here at once, instead of being resolved from a stored decision,
        which walks its subtree (in a 2-worker precompute, most of what one worker needs
        the other solved).

        ``reread``: also note the keys other processes stored since this table read them;
        each is read again the first time a lookup misses in it (what is in memory stays
        true, so it is still used). A precompute worker, sent every box its writer
        stores, passes False and reads no key twice. Returns how many keys changed."""
        if self.store is None:
            return 0
        changed = self.store.changed_keys(self) if reread else []
        self._stale.update(changed)
        self._shared_seen, batches = self.store.shared(self._shared_seen, source)
        for boxes, solutions in batches:
            for key, rows in boxes.items():
                table = self.tables.get(key)
                if table is None:  # taken in when the key is first read (``table``)
                    self._pending.setdefault(key, []).extend(rows)
                else:
                    _take_in(table, rows)
            for spec, got in solutions.items():
                if spec not in self.solutions:
                    self.solutions[spec] = (None if got is None else Stored(*got), None)
        return len(changed)

    def release(self) -> None:
        """Flush (rows whole), then forget the solutions and box tables held in memory (the
        tables are read again when needed)."""
        self.flush(whole=True)
        self.solutions.clear()
        if self.store is not None and not self.read_only:
            self.tables.clear()
            self._stale.clear()

    def close(self) -> None:
        """Flush (rows whole) and release the store."""
        if self.store is not None:
            self.flush(whole=True)
            self.store.close()
            self.store = None

    def stats(self) -> dict[str, int]:
        """Tables, boxes and points covered (of the box tables in memory)."""
        boxes = sum(len(t) for t in self.tables.values())
        points = sum(b.volume() for t in self.tables.values() for b in t.boxes)
        return {"tables": len(self.tables), "boxes": boxes, "points": points}


def _take_in(table: BoxTable, rows: list[tuple[Point, Point, Value]]) -> None:
    """Add boxes found elsewhere to ``table``, unmerged (so they are not collected as this
    table's own), skipping each that one box already holds."""
    for lo, hi, value in rows:
        if table.holding(lo, hi, value) is None:
            table.load(Box(lo, hi, value))
