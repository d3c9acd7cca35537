"""Residency: a Spec's whole working set held in an outer cache that caches it implicitly.

An outer cache such as a 512 KiB L2 is not a place a program chooses for one operand: the
hardware keeps whatever was touched recently, so a Spec whose operands together fit in it
reads them from memory once and from the cache afterwards. A level marked
``MemoryLevel.whole_specs`` is modelled that way. When every operand of a Spec that lives in
a level moving into it fits at once, the ``reside`` schema moves them all there together
(no buffer, no copy), and that action is *forced*: it is the only one offered for the Spec
(``forced``), because a program cannot opt out of a cache. Operands the Spec reads once
stay where they are (``resident_operands``).

Cost: the first touch of each line is paid at the source level's price and every later
touch at the cache's, so the node charges each operand's lines at the difference of the two
prices; its body then pays the cache's price for every access, the first included. A Spec
that reads its data once thus costs what it did without the cache, and one that reads it
again pays the cache's price for the repeats. The body's limit at the cache level is 0:
nothing more is moved there. C: the body's, unchanged.

Reuse across a loop: a loop whose step is resident (``loop_reuse``) keeps the operands it
does not move along in the cache from one trip to the next, so only its first trip fills
them; the loop takes the later trips' fills of those operands off its cost. (Most recently
used lines stay in an LRU cache, and those operands are touched on every trip.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.cost import access_cost, iteration_points
from morello.nodes.base import NodeBase, max_peaks
from morello.spec import Spec, TensorSpec, memory_units, short_of, snap_up

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class ResideAction(NodeBase):
    """Operands ``operands`` of a Spec held together in the cache level ``level``."""

    rule: str
    level: str
    operands: tuple[int, ...]
    body: Spec

    #: The only action offered for a Spec it applies to (see the module's docstring).
    forced = True

    @property
    def children(self) -> tuple[Spec, ...]:
        """The body: the same goal with the operands resident."""
        return (self.body,)

    def describe(self) -> str:
        """One-line description."""
        which = ", ".join(map(str, self.operands))
        return f"{self.rule}: operands {which} resident in {self.level} (cached, no copy)"

    def decision(self) -> tuple[Any, ...]:
        """The same residency at any Spec (which operands follows from the Spec)."""
        return ("reside", self.rule, self.level)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """The first touch of every resident line at the difference of the two prices."""
        fill = sum(_fill(spec.operands[i], self.body.operands[i], ctx) for i in self.operands)
        return fill + sum(child_costs)

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The body's peaks, and at the cache the lines of every resident operand."""
        peak = list(max_peaks(child_peaks, len(ctx.target.levels)))
        idx = ctx.target.level_index(self.level)
        lv = ctx.target.levels[idx]
        units = sum(memory_units(self.body.operands[i], lv) for i in self.operands)
        peak[idx] = snap_up(peak[idx] + units)
        return tuple(peak)

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """The body over the same buffers: residency makes no code."""
        em.node(impl.children[0], views)


def resident_operands(
    spec: Spec, idx: int, ctx: SynthesisContext
) -> tuple[tuple[int, ...], tuple[TensorSpec, ...]] | None:
    """The operands of ``spec`` that residency in level ``idx`` (one of
    ``Target.whole_specs_levels``) moves there, and the Spec's operands after the move;
    None when the level has no room in the Spec's limits, no operand lives in a level
    moving there, the Spec reuses none of those, or they do not fit.

    An operand that ``spec`` reads once (each element used by one point of its iteration
    space: a matvec's weights, an elementwise op's input) is not moved: the cache gains it
    nothing within the Spec, so it stays in its level, where its reads are priced as the
    streams they are. It still passes through the cache, so it counts toward the fit.
    Moved, its fill was the tile's price in main memory less the cache's, which for a tile
    of a few long rows (concurrent streams against a strided walk of cache lines) came to
    nothing or less, and for a packed strip (one stream) to more than streaming it: f32
    matvecs ran 13% slower for it, a bf16 one 47% (BENCHMARKS.md, "Operands read once are
    not resident"). A loop around such steps credits nothing for it either
    (``loop_reuse``), though it may reuse it: the step pays for it piece by piece at main
    memory's prices, which can be less than the whole tile's fill the credit would take off
    (tried: crediting it made 512^3 and 1024^3 programs 4 and 43 times slower)."""
    target = ctx.target
    level = target.levels[idx]
    cands = tuple(i for i, ts in enumerate(spec.operands) if level.name in ts.level.moves_to)
    if not cands:
        return None
    points = iteration_points(spec, ctx)
    moved = tuple(i for i in cands if spec.operands[i].volume < points)
    if not moved:
        return None
    if spec.limits[idx] == 0:
        short_of(idx, 1)  # (at least: the operands are not sized when there is no room)
        return None
    operands = list(spec.operands)
    units = 0
    for i in cands:  # what the Spec reads once passes through the cache: it counts
        there = attrs.evolve(spec.operands[i], level=level)
        units += memory_units(there, level)
        if i in moved:
            operands[i] = there
    if units > spec.limits[idx]:
        short_of(idx, units)
        return None
    return moved, tuple(operands)


def not_resident(spec: Spec, ctx: SynthesisContext) -> Spec:
    """``spec`` with no room in the caches that hold whole Specs, so that neither it nor a
    Spec below it is resident: a program placed as on a target without such a cache (for
    tools and tests that force decisions about main memory, such as packing from it)."""
    limits = list(spec.limits)
    for idx in ctx.target.whole_specs_levels:
        limits[idx] = 0
    return attrs.evolve(spec, limits=tuple(limits))


def loop_reuse(spec: Spec, body: Spec, var: str, repeats: int, ctx: SynthesisContext) -> int:
    """The fills that ``repeats`` trips after a loop's first do not pay again.

    ``spec`` is the loop's Spec, ``body`` its step's, ``var`` the index it runs over. When
    the step is resident in a ``whole_specs`` level (a forced action, so its solution is
    that residency), each operand it moved there that the loop does not move along is the
    same data on every trip and stays in the cache: only the first trip's fill of it is
    paid. Where the step fits several such levels, the largest of their credits (the
    innermost cache's, where the step resides): the step fills one of them, not each.
    """
    saved = None
    for idx in ctx.target.whole_specs_levels:  # on the search's hot path: usually none
        got = resident_operands(body, idx, ctx)
        if got is None:
            continue
        moved, operands = got
        moving = {i for i, _ in ctx.ruleset.ops[spec.op].operands_using(var)}
        here = sum(_fill(body.operands[i], operands[i], ctx) for i in moved if i not in moving)
        saved = here if saved is None else max(saved, here)
    return repeats * (saved or 0)


def _fill(src: TensorSpec, dest: TensorSpec, ctx: SynthesisContext) -> int:
    """The first touch of an operand's lines moved from ``src`` into the cache, ``dest``:
    the difference of the two levels' prices. Not clamped at 0: under coefficients that
    price the cache above its source (a calibration's trial steps do) the difference is
    negative, and the cost stays linear in the coefficients (``calibration.features``)."""
    return access_cost(src, ctx) - access_cost(dest, ctx)
