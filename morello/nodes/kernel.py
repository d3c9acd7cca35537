"""A kernel call: a leaf whose cost and C come from its declaration in a rule file.

Cost: the kernel's affine expression in the target's coefficients, plus the lines its
operands touch at their levels (split by execution resource where the target names them).
Peak memory: the scratch registers it declares. C: its template, rendered over its operands'
elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from morello.codegen.c import element, row_stride
from morello.cost import kernel_cost
from morello.nodes.base import NodeBase, max_peaks
from morello.spec import Spec, snap_up

if TYPE_CHECKING:
    from morello.codegen.c import Emitter, View
    from morello.context import SynthesisContext
    from morello.impl import Impl


@attrs.frozen
class KernelAction(NodeBase):
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

    def decision(self) -> tuple[Any, ...]:
        """The kernel, by name."""
        return ("kernel", self.kernel)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        """The declared cost plus the lines the operands touch (``morello.cost.kernel_cost``)."""
        return kernel_cost(ctx.ruleset.kernel(self.kernel), dict(self.bindings), spec, ctx)

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        """The scratch registers the kernel declares."""
        peak = list(max_peaks(child_peaks, len(ctx.target.levels)))
        for level, units in ctx.ruleset.kernel(self.kernel).scratch:
            idx = ctx.target.level_index(level)
            peak[idx] = max(peak[idx], snap_up(units))
        return tuple(peak)

    def headers(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """The headers the kernel's rule file includes."""
        return tuple(ctx.ruleset.kernel(self.kernel).includes)

    def requires(self, ctx: SynthesisContext) -> tuple[str, ...]:
        """The CPU features the kernel's rule file requires."""
        return tuple(ctx.ruleset.kernel(self.kernel).requires)

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        """The template over the operands' first elements."""
        kernel = em.ctx.ruleset.kernel(self.kernel)
        operands = {pat.name: element(v) for pat, v in zip(kernel.operands, views, strict=True)}
        strides = {
            pat.name: row_stride(v, ts.shape[0])
            for pat, v, ts in zip(kernel.operands, views, impl.spec.operands, strict=True)
            if pat.name in kernel.strided
        }
        for line in kernel.render(operands, dict(self.bindings), strides):
            em.emit(line)
