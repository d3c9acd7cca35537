"""Impl trees: the decisions a rewrite makes, and the tree of them the search returns.

An action is one rewrite applied to one Spec; it names its sub-Specs (``children``). An Impl
is an action whose children are solved: it carries its cost and peak memory. Actions mean the
same thing at every Spec they apply to ("loop over n in steps of 8", "move operand 1 to L1"),
which is what lets the memo table store them for whole regions of Specs. The kinds of action
live in ``morello.nodes``, one module each; ``Action`` is what they all provide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from morello.spec import Spec

if TYPE_CHECKING:
    from collections.abc import Callable

    from morello.codegen.c import Emitter, Lin, View
    from morello.context import SynthesisContext
    from morello.nodes.base import Copy
    from morello.spec import TensorSpec


class Action(Protocol):
    """One decision at one Spec; see ``morello.nodes``."""

    @property
    def children(self) -> tuple[Spec, ...]:
        """The sub-Specs, in the order their solutions are passed back."""

    def describe(self) -> str:
        """One line for ``--impl``."""

    def decision(self) -> tuple[Any, ...]:
        """What the memo table stores: the same value at every Spec the action applies to."""

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """Cost at ``spec`` given the children's costs (in child order)."""

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The least memory limits (per level) under which this node is chosen."""

    def headers(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """C headers the node's own code needs."""

    def requires(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """CPU features the node's own code needs."""

    def parallelism(self) -> int:
        """Threads the node's own code runs its children on (1: one after the other)."""

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """Write the node's C through ``em`` (children through ``em.node``)."""

    def copy_in(self, impl: Impl) -> Copy | None:
        """The node as a copy of an input into a new buffer, then a body (``nodes.base.Copy``),
        so that a loop around it may copy the next trip's tile ahead; None for most."""

    def pieces(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Emitter, Lin], None]] | None:
        """The node's C as independent pieces, ``(count, emit_piece)``, or None."""

    def piece_reads(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Lin], list[tuple[View, TensorSpec]]]] | None:
        """The inputs in memory each whole piece reads, ``(count, reads)``, or None."""


@attrs.frozen
class Impl:
    """A solved Spec: the chosen action, solved children, total cost and peak memory."""

    spec: Spec
    action: Action
    children: tuple[Impl, ...]
    cost: int
    peaks: tuple[int, ...]

    def threads(self) -> int:
        """The most threads any part of the tree runs on (1: it is serial)."""
        return max(node.action.parallelism() for node in self.walk())

    def past_forced(self) -> Impl:
        """The first node of the tree that the search chose: this one, unless its action is
        ``forced`` (residency in a cache the program cannot opt out of, which has one
        child), then that child's."""
        node = self
        while getattr(node.action, "forced", False) and len(node.children) == 1:
            node = node.children[0]
        return node

    def walk(self) -> list[Impl]:
        """This node and every descendant, pre-order."""
        out = [self]
        for c in self.children:
            out.extend(c.walk())
        return out
