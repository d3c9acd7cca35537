"""Typed syntax nodes of spec and rule files; every node carries its source location.

Locations do not take part in equality, so equal declarations compare equal wherever they
were written.
"""

from __future__ import annotations

import attrs
import lark

from morello.errors import SourceLocation
from morello.lang._lark import loc_of

Dim = int | str


@attrs.frozen
class TensorType:
    """``f32[64, n] col_major @L1|RF v8``: dims may be names or ``*`` in rule patterns."""

    dtype: str
    dims: tuple[Dim, ...] = attrs.field(converter=tuple)
    levels: tuple[str, ...] = attrs.field(converter=tuple)
    vector_size: int | None
    props: tuple[str, ...] = attrs.field(converter=tuple)
    loc: SourceLocation = attrs.field(eq=False)


def tensor_type(path: str, tree: lark.Tree[lark.Token]) -> TensorType:
    """Build a TensorType from a ``tensor_type`` parse tree."""
    dtype_tok, *rest = tree.children
    dims: list[Dim] = []
    levels: list[str] = []
    vector_size: int | None = None
    props: list[str] = []
    for child in rest:
        assert isinstance(child, lark.Tree)
        if child.data == "dim":
            if not child.children:
                dims.append("*")
                continue
            tok = child.children[0]
            assert isinstance(tok, lark.Token)
            dims.append(int(tok) if tok.type == "INT" else str(tok))
        elif child.data == "level_mod":
            levels.extend(str(t) for t in child.children)
        elif child.data == "vecsize_mod":
            vector_size = int(str(child.children[0])[1:])
        elif child.data == "prop_mod":
            props.append(str(child.children[0]))
    return TensorType(
        str(dtype_tok), tuple(dims), tuple(levels), vector_size, tuple(props), loc_of(path, tree)
    )
