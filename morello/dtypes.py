"""Scalar element types: size, C spelling and NumPy spelling.

Knows nothing of ops or targets; vector types are declared by targets.
"""

from __future__ import annotations

from typing import Final

import attrs
import numpy as np


@attrs.frozen
class Dtype:
    """A scalar element type."""

    name: str
    size: int
    c_type: str
    numpy: str

    def np_dtype(self) -> np.dtype[np.generic]:
        """The NumPy dtype used for buffers of this type."""
        return np.dtype(self.numpy)


DTYPES: Final[dict[str, Dtype]] = {
    d.name: d
    for d in (
        Dtype("f32", 4, "float", "float32"),
        Dtype("f64", 8, "double", "float64"),
        Dtype("s32", 4, "int32_t", "int32"),
        Dtype("u32", 4, "uint32_t", "uint32"),
        Dtype("s16", 2, "int16_t", "int16"),
        Dtype("u16", 2, "uint16_t", "uint16"),
        Dtype("s8", 1, "int8_t", "int8"),
        Dtype("u8", 1, "uint8_t", "uint8"),
    )
}


def dtype(name: str) -> Dtype:
    """Look up a dtype by name; raises KeyError for unknown names."""
    return DTYPES[name]
