"""A graph's first reduction in two parts: all but its last step into a temporary, then the
last step fused with the rest of the graph, which adds the temporary in.

``y = relu(add(matmul(x, w), b))`` split along ``k`` at 256 of 512 becomes a block of two
stages: ``p = matmul(x[:, :256], w[:256, :])`` into a temporary, then the graph
``y = relu(add(add(matmul(x[:, 256:], w[256:, :]), p), b))``. The first stage is an ordinary
Spec (the search splits it further as it likes); the second is a graph whose tiles can keep
the product's last part in registers while the partial sum, the bias and the ReLU are
applied, storing each output once. Without it, a graph whose first statement reduces over
more than fits beside its tile computes that statement whole into a temporary, then the
rest in a second pass over the temporary.

A block (``BlockAction``) whose second stage sees the operands the split index runs along
moved past the first stage's part: the cost is the stages' sum, the peak the stages' most
plus the temporary, and the C declares the temporary, then runs the stages in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from morello.codegen.c import shift_views
from morello.nodes.block import BlockAction

if TYPE_CHECKING:
    from morello.codegen.c import View


@attrs.frozen
class SplitFuseAction(BlockAction):
    """A block of two stages (``BlockAction``) over a split of index ``var``: the first
    stage reads the parent's operands from the start of ``var``, the second, the last
    ``step`` indices, reads those in ``moved`` (the parent's (operand, dim) pairs ``var``
    runs along) from ``at``."""

    var: str = ""
    at: int = 0
    step: int = 0
    moved: tuple[tuple[int, int], ...] = ()

    def describe(self) -> str:
        """One-line description."""
        temps = "".join(f", temporary {ts.describe()}" for _, ts in self.temporaries)
        return f"{self.rule}: {self.var} in {self.at} + {self.step}, the last fused{temps}"

    def decision(self) -> tuple[Any, ...]:
        """The same split at any Spec: rule, index, the last part's size, where the
        temporary lives."""
        places = tuple((ts.level.name, name, ts.vector_size or 0) for name, ts in self.temporaries)
        return ("split_fuse", self.rule, self.var, self.step, places)

    def stage_views(self, stage: int, views: list[View]) -> list[View]:
        """The first stage reads from the start of ``var``, the second from ``at``."""
        return views if stage == 0 else shift_views(views, self.moved, self.at)
