"""What most node kinds share: peak memory as the most any child needs, no headers, one
thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, Lin, View
    from morello.context import SynthesisContext
    from morello.impl import Impl
    from morello.spec import Spec, TensorSpec


class Copy(NamedTuple):
    """A node that copies one input operand into a new buffer before its body (a packing
    move), taken apart so that a loop around it can copy the next trip's tile ahead."""

    operand: int  #: which operand of the node's Spec is copied
    dest: TensorSpec  #: the buffer's tensor
    prologue: Impl  #: the copy, whose operands are the source and the buffer
    body: Impl  #: the rest, over the buffer


class NodeBase:
    """Defaults for a node kind; a kind overrides what it adds."""

    __slots__ = ()

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The least limits (per level) under which this node is chosen: its children's most."""
        return max_peaks(child_peaks, len(ctx.target.levels))

    def headers(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """C headers the node's own code needs (its children's are asked separately)."""
        return ()

    def requires(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """CPU features the node's own code needs, as the target's ``isa`` names them."""
        return ()

    def parallelism(self) -> int:
        """Threads the node's own code runs its children on: 1, one after the other."""
        return 1

    def copy_in(self, impl: Impl) -> Copy | None:
        """The node as a copy of an input then a body (``Copy``), or None: most are not."""
        return None

    def pieces(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Emitter, Lin], None]] | None:
        """The node's C over ``views`` as ``n`` independent pieces: ``(n, emit_piece)``, where
        ``emit_piece(em, index)`` writes piece ``index`` (a C expression); or None."""
        return None

    def piece_reads(
        self, em: Emitter, impl: Impl, views: list[View]
    ) -> tuple[int, Callable[[Lin], list[tuple[View, TensorSpec]]]] | None:
        """What the whole pieces of ``pieces`` read, for prefetching a piece ahead:
        ``(n, reads)``, ``reads(index)`` the view and tensor of each input in memory that
        piece ``index`` reads, for ``index`` below ``n``; or None (no prefetching)."""
        return None


def max_peaks(child_peaks: Sequence[tuple[int, ...]], levels: int) -> tuple[int, ...]:
    """Per level, the most any child needs (zeros without children)."""
    if not child_peaks:
        return (0,) * levels
    if len(child_peaks) == 1:
        return tuple(child_peaks[0])
    return tuple(map(max, *child_peaks))  # on the search's hot path: once per action costed
