"""The memo table: solved Specs, stored as boxes of equal decisions.

``MemoTable`` maps Specs to coordinates (``coords.py``), keeps one ``BoxTable`` per table
key, and turns solutions into position-independent values and back. A solution found for a
Spec under limits L, requiring limits R, is stored for every limit between R and L (it is
optimal and feasible there); "no implementation under L" is stored for every limit up to L.
Persistence is delegated to a store (``sqlite.py``); without one the table lives in memory.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

from morello.db.boxes import BoxTable, Value
from morello.db.coords import Key, limit_coord, limit_from_coord, spec_to_coords
from morello.spec import Spec

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


def key_text(key: Key) -> str:
    """Stable text form of a table key (for storage)."""
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
    """A solution read from the table: the decision, not yet the action with its sub-Specs."""

    decision: tuple[Any, ...]
    cost: int
    peaks: tuple[int, ...]


class Store(Protocol):
    """Where a MemoTable persists its boxes."""

    def load(self, table: MemoTable) -> None:
        """Fill ``table`` with the stored boxes."""

    def save(self, table: MemoTable) -> None:
        """Write the boxes added and removed since the last save, atomically."""

    def close(self) -> None:
        """Release the store."""


class MemoTable:
    """Spatially compressed memo of Spec solutions for one synthesis context."""

    def __init__(self, ctx: SynthesisContext, store: Store | None = None) -> None:
        self.ctx = ctx
        self.tables: dict[Key, BoxTable] = {}
        self.store = store
        self.puts = 0
        if store is not None:
            store.load(self)

    def table(self, key: Key) -> BoxTable:
        """The box table of ``key`` (created empty if new)."""
        t = self.tables.get(key)
        if t is None:
            t = self.tables[key] = BoxTable(len(self.ctx.ruleset.ops[key[0]].index_vars))
        return t

    def _volume(self, spec: Spec) -> int:
        opdef = self.ctx.ruleset.ops[spec.op]
        sizes = opdef.sizes([t.shape for t in spec.operands])
        assert isinstance(sizes, dict)
        v = 1
        for n in sizes.values():
            v *= n
        return v

    def put(self, spec: Spec, solution: Solution | None) -> None:
        """Store the solution (or the absence of one) of ``spec``."""
        key, point = spec_to_coords(spec, self.ctx)
        nsize = len(self.ctx.ruleset.ops[spec.op].index_vars)
        table = self.table(key)
        self.puts += 1
        if solution is None:
            lo = (*point[:nsize], *(0 for _ in point[nsize:]))
            table.insert(lo, point, None)
            return
        per_volume = Fraction(solution.cost, self._volume(spec))
        peaks = tuple(limit_coord(p) for p in solution.peaks)
        value = (
            decision_of(solution.action),
            per_volume.numerator,
            per_volume.denominator,
            peaks,
        )
        table.insert((*point[:nsize], *peaks), point, value)

    def get(self, spec: Spec) -> Stored | object | None:
        """The stored solution of ``spec``, None if it has none, or ``MISSING``."""
        key, point = spec_to_coords(spec, self.ctx)
        table = self.tables.get(key)
        if table is None:
            return MISSING
        box = table.lookup(point)
        if box is None:
            return MISSING
        if box.value is None:
            return None
        decision, num, den, peak_coords = box.value
        cost = Fraction(num, den) * self._volume(spec)
        if cost.denominator != 1:
            return MISSING
        peaks = tuple(limit_from_coord(c) for c in peak_coords)
        return Stored(decision, int(cost), peaks)

    def flush(self) -> None:
        """Persist what changed (no-op without a store)."""
        if self.store is not None:
            self.store.save(self)

    def close(self) -> None:
        """Flush and release the store."""
        if self.store is not None:
            self.store.save(self)
            self.store.close()
            self.store = None

    def stats(self) -> dict[str, int]:
        """Tables, boxes and points covered."""
        boxes = sum(len(t) for t in self.tables.values())
        points = sum(b.volume() for t in self.tables.values() for b in t.boxes)
        return {"tables": len(self.tables), "boxes": boxes, "points": points}
