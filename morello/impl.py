"""Impl trees: the decisions a rewrite makes, and the tree of them the search returns.

An action is one rewrite applied to one Spec; it names its sub-Specs (``children``). An Impl
is an action whose children are solved: it carries its cost and peak memory. Actions mean the
same thing at every Spec they apply to ("loop over n in steps of 8", "move operand 1 to L1"),
which is what lets the memo table store them for whole regions of Specs.
"""

from __future__ import annotations

import attrs

from morello.spec import Spec, TensorSpec


@attrs.frozen
class LoopAction:
    """A serial loop over index variable ``var`` in steps of ``step``.

    ``body`` is the Spec of one full step; ``tail``, if any, handles the last
    ``extent % step`` indices once after the loop.
    """

    rule: str
    var: str
    step: int
    trips: int
    body: Spec
    tail: Spec | None

    @property
    def children(self) -> tuple[Spec, ...]:
        """Sub-Specs: body, then tail."""
        return (self.body,) if self.tail is None else (self.body, self.tail)

    def describe(self) -> str:
        """One-line description."""
        tail = " + tail" if self.tail is not None else ""
        return f"{self.rule}: for {self.var} in {self.trips} x {self.step}{tail}"


@attrs.frozen
class BlockAction:
    """Sub-Specs run in sequence; ``operand_maps[i]`` picks each stage's operands."""

    rule: str
    stages: tuple[Spec, ...]
    operand_maps: tuple[tuple[int, ...], ...]

    @property
    def children(self) -> tuple[Spec, ...]:
        """The stages, in order."""
        return self.stages

    def describe(self) -> str:
        """One-line description."""
        return f"{self.rule}: block of {len(self.stages)}"


@attrs.frozen
class MoveAction:
    """Operand ``operand`` moved to ``dest`` (a new buffer, or a cache residency).

    ``layout`` names the layout family chosen for a new buffer (None for a cache).
    """

    rule: str
    operand: int
    dest: TensorSpec
    layout: str | None
    new_buffer: bool
    prologue: Spec | None
    body: Spec
    epilogue: Spec | None

    @property
    def children(self) -> tuple[Spec, ...]:
        """Prologue (if any), body, epilogue (if any)."""
        out = [self.body]
        if self.prologue is not None:
            out.insert(0, self.prologue)
        if self.epilogue is not None:
            out.append(self.epilogue)
        return tuple(out)

    def describe(self) -> str:
        """One-line description."""
        note = "" if self.new_buffer else " (cached, no copy)"
        return f"{self.rule}: operand {self.operand} -> {self.dest.describe()}{note}"


@attrs.frozen
class KernelAction:
    """A leaf: kernel ``kernel`` with its dim-variable bindings."""

    kernel: str
    bindings: tuple[tuple[str, int], ...] = attrs.field(converter=tuple)

    @property
    def children(self) -> tuple[Spec, ...]:
        """None: kernels are leaves."""
        return ()

    def describe(self) -> str:
        """One-line description."""
        return f"kernel {self.kernel}"


Action = LoopAction | BlockAction | MoveAction | KernelAction


@attrs.frozen
class Impl:
    """A solved Spec: the chosen action, solved children, total cost and peak memory."""

    spec: Spec
    action: Action
    children: tuple[Impl, ...]
    cost: int
    peaks: tuple[int, ...]

    def walk(self) -> list[Impl]:
        """This node and every descendant, pre-order."""
        out = [self]
        for c in self.children:
            out.extend(c.walk())
        return out
