"""What most node kinds share: peak memory as the most any child needs, no headers, one
thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.spec import Spec


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


def max_peaks(child_peaks: Sequence[tuple[int, ...]], levels: int) -> tuple[int, ...]:
    """Per level, the most any child needs (zeros without children)."""
    if not child_peaks:
        return (0,) * levels
    if len(child_peaks) == 1:
        return tuple(child_peaks[0])
    return tuple(map(max, *child_peaks))  # on the search's hot path: once per action costed
