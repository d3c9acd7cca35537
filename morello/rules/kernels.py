"""Kernels: a pattern over a Spec, an affine cost, and a C template.

Templates may contain ``{x}`` (operand ``x`` as a C lvalue: an element or a register
variable), ``{&x}`` (the address of ``x``'s first element) and ``{n}`` (the extent a dim
variable of the pattern is bound to), ``{mask(n)}`` (an integer literal with the low
``n`` bits set, for a dim variable ``n`` the kernel bounds by at most 64: the lane mask of a
masked load or store of ``n`` elements) and ``{stride(x)}`` (the distance in elements
between consecutive indices of ``x``'s first dim: a row's stride; the kernel then matches
only tiles of strided layouts, not packed ones); nothing else in braces is substituted.
Substitution is a small regex, never ``str.format``. Knows no kernel by name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Final

import attrs

from morello.errors import SourceLocation
from morello.spec import Spec, TensorSpec, short_of

#: ``{x}``, ``{&x}`` (groups 1 and 2), ``{mask(n)}`` (group 3) or ``{stride(x)}`` (group 4).
PLACEHOLDER: Final = re.compile(
    r"\{(?:(&?)([A-Za-z_][A-Za-z0-9_]*)|mask\(([A-Za-z_][A-Za-z0-9_]*)\)"
    r"|stride\(([A-Za-z_][A-Za-z0-9_]*)\))\}"
)
#: The widest lane mask ``{mask(n)}`` renders (an ``unsigned long long`` literal).
MAX_MASK_BITS: Final = 64


@attrs.frozen
class OperandPattern:
    """What a kernel requires of one operand. Dims are ints, variable names or ``*``."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] = attrs.field(converter=tuple)
    levels: tuple[str, ...] = attrs.field(converter=tuple)
    vector_size: int | None = None
    contiguous: bool = False
    layouts: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    def match(
        self,
        ts: TensorSpec,
        bindings: dict[str, int],
        layout_named: Callable[[str, TensorSpec], bool],
    ) -> bool:
        """Whether ``ts`` fits; binds dim variables in ``bindings`` as a side effect."""
        if ts.dtype.name != self.dtype or len(ts.shape) != len(self.dims):
            return False
        if self.levels and ts.level.name not in self.levels:
            return False
        if self.vector_size is not None and ts.vector_size != self.vector_size:
            return False
        if self.contiguous and not ts.layout.is_fully_contiguous():
            return False
        if self.layouts and not any(layout_named(name, ts) for name in self.layouts):
            return False
        for want, have in zip(self.dims, ts.shape, strict=True):
            if isinstance(want, int):
                if want != have:
                    return False
            elif want != "*" and bindings.setdefault(want, have) != have:
                return False
        return True


@attrs.frozen
class CostTerm:
    """``factor * name * name ... [/ divisor]``: names are cost coefficients or bound dim
    variables."""

    factor: int
    names: tuple[str, ...] = attrs.field(converter=tuple)
    #: The term is divided by this, rounded up (``n * vector_op / 8``).
    divisor: int = 1


@attrs.frozen
class Kernel:
    """A microkernel declared in a rule file."""

    name: str
    op: str
    accum: bool
    operands: tuple[OperandPattern, ...] = attrs.field(converter=tuple)
    cost: tuple[CostTerm, ...] = attrs.field(converter=tuple)
    c_lines: tuple[str, ...] = attrs.field(converter=tuple)
    rule_set: str
    requires: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    includes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    scratch: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=tuple)
    #: ``(variable, lowest, highest)``: the extents a dim variable may be bound to.
    bounds: tuple[tuple[str, int, int], ...] = attrs.field(default=(), converter=tuple)
    loc: SourceLocation | None = attrs.field(default=None, eq=False)

    def match(
        self,
        spec: Spec,
        layout_named: Callable[[str, TensorSpec], bool],
        level_index: Callable[[str], int] | None = None,
    ) -> dict[str, int] | None:
        """Dim-variable bindings if the kernel implements ``spec``, else None.

        With ``level_index`` (level name -> position in ``spec.limits``), a kernel whose
        scratch does not fit the Spec's limits does not match.
        """
        if spec.op != self.op or spec.accum != self.accum:
            return None
        if len(spec.operands) != len(self.operands):
            return None
        bindings: dict[str, int] = {}
        for pat, ts in zip(self.operands, spec.operands, strict=True):
            if not pat.match(ts, bindings, layout_named):
                return None
        if self.strided and not all(
            is_strided(ts)
            for pat, ts in zip(self.operands, spec.operands, strict=True)
            if pat.name in self.strided
        ):
            return None
        for var, lo, hi in self.bounds:
            if not lo <= bindings[var] <= hi:
                return None
        if level_index is not None:
            for level, units in self.scratch:
                idx = level_index(level)
                if spec.limits[idx] < units:
                    short_of(idx, units)  # it would match with more room
                    return None
        return bindings

    @functools.cached_property
    def strided(self) -> frozenset[str]:
        """The operands whose row stride the template reads (``{stride(x)}``)."""
        return frozenset(
            m.group(4)
            for line in self.c_lines
            for m in PLACEHOLDER.finditer(line)
            if m.group(4) is not None
        )

    def main_cost(self, bindings: Mapping[str, int], coefficients: Mapping[str, int]) -> int:
        """The declared cost with dim variables and coefficients substituted."""
        total = 0
        for term in self.cost:
            value = term.factor
            for name in term.names:
                value *= bindings[name] if name in bindings else coefficients[name]
            total += -(-value // term.divisor)
        return total

    def render(
        self,
        operands: Mapping[str, tuple[str, str]],
        bindings: Mapping[str, int] = {},
        strides: Mapping[str, int] = {},
    ) -> list[str]:
        """C lines with ``{x}``/``{&x}`` replaced from ``operands[x] = (lvalue, address)``,
        ``{n}`` by the extent bound to dim variable ``n``, ``{mask(n)}`` by its mask and
        ``{stride(x)}`` by ``strides[x]``."""

        def sub(m: re.Match[str]) -> str:
            if m.group(3) is not None:
                return lane_mask(bindings[m.group(3)])
            if m.group(4) is not None:
                return str(strides[m.group(4)])
            if m.group(2) not in operands:
                return str(bindings[m.group(2)])
            lvalue, address = operands[m.group(2)]
            return address if m.group(1) else lvalue

        return [PLACEHOLDER.sub(sub, line) for line in self.c_lines]


def is_strided(ts: TensorSpec) -> bool:
    """Whether ``ts``'s layout has a fixed stride per dim (no packed blocks): a kernel that
    reads ``{stride(x)}`` matches only such tiles."""
    return ts.layout.is_strided()


def lane_mask(n: int) -> str:
    """A C integer literal with the low ``n`` bits set (0 <= n <= 64): ``0x7u`` for 3."""
    if not 0 <= n <= MAX_MASK_BITS:
        raise ValueError(f"a lane mask has 0..{MAX_MASK_BITS} bits, not {n}")
    return f"{hex((1 << n) - 1)}{'u' if n <= 32 else 'ull'}"
