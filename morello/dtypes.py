"""Scalar element types: size, C spelling, NumPy storage and the values they hold.

Knows nothing of ops or targets; vector types are declared by targets.

A dtype has a *storage* NumPy dtype (the bytes in a buffer) and a *logical* one (the values
the reference computes with). They are the same for every type NumPy has; ``bf16`` is stored
as ``uint16`` bit patterns and read as ``float32`` values, with round-to-nearest-even when a
float32 value is narrowed to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    import numpy as np


@attrs.frozen(cache_hash=True)
class Dtype:
    """A scalar element type. One object per type (``DTYPES``): TensorSpecs hold it, and
    ``str()`` gives its name, so messages and C comments read ``f32``.

    Attributes:
        name: the spelling in spec and rule files (``f32``, ``bf16``).
        size: bytes per element.
        c_type: the C type of one element in a buffer.
        numpy: the NumPy dtype of buffers (storage).
        logical: the NumPy dtype of the values (defaults to ``numpy``).
        c_header: the header ``c_type`` needs, if any.
        accumulates_into: wider dtypes an op over this type may produce (bf16 products are
            summed in f32).
    """

    name: str
    size: int
    c_type: str
    numpy: str
    logical: str = ""
    c_header: str | None = None
    accumulates_into: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[object, tuple[str]]:
        # Pickled by name: a Spec sent to a worker or stored in a cache comes back holding
        # the same object as every other Spec (and the pickle stays small).
        return (dtype, (self.name,))

    def np_dtype(self) -> np.dtype[np.generic]:
        """The NumPy dtype used for buffers of this type."""
        import numpy as np

        return np.dtype(self.numpy)

    def logical_dtype(self) -> np.dtype[np.generic]:
        """The NumPy dtype of this type's values."""
        import numpy as np

        return np.dtype(self.logical or self.numpy)

    @property
    def is_float(self) -> bool:
        """Whether the values are floating point."""
        import numpy as np

        return bool(np.issubdtype(self.logical_dtype(), np.floating))

    @property
    def unit_roundoff(self) -> float:
        """Half the distance from 1 to the next value (0 for integers)."""
        import numpy as np

        if self.name == "bf16":
            return 2.0**-8
        if not self.is_float:
            return 0.0
        return float(np.finfo(self.logical_dtype()).eps) / 2

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """``values`` as this type's logical dtype, rounded to representable values."""
        import numpy as np

        if self.name == "bf16":
            return bf16_bits_to_f32(f32_to_bf16_bits(values))
        return np.asarray(values).astype(self.logical_dtype())

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Storage for logical ``values`` (which should already be representable)."""
        import numpy as np

        if self.name == "bf16":
            return f32_to_bf16_bits(values)
        return np.asarray(values).astype(self.np_dtype())

    def decode(self, stored: np.ndarray) -> np.ndarray:
        """The logical values held in storage ``stored``."""
        import numpy as np

        if self.name == "bf16":
            return bf16_bits_to_f32(stored)
        return np.asarray(stored)


def f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of ``values`` rounded to nearest, ties to even.

    The rounding is from float32: other inputs are converted to float32 first (a float64
    input is thus rounded twice, which can differ from rounding it once in the last place).
    NaNs stay NaNs (quiet, sign kept); values past the largest bf16 round to infinity.
    The result has the shape of ``values``.
    """
    import numpy as np

    f = np.ascontiguousarray(values, dtype=np.float32).reshape(np.shape(values))
    bits = f.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact: bf16 is a truncated float32)."""
    import numpy as np

    b = np.ascontiguousarray(bits, dtype=np.uint16).reshape(np.shape(bits))
    return (b.astype(np.uint32) << 16).view(np.float32)


DTYPES: Final[dict[str, Dtype]] = {
    d.name: d
    for d in (
        Dtype("f32", 4, "float", "float32"),
        Dtype("f64", 8, "double", "float64"),
        Dtype("bf16", 2, "uint16_t", "uint16", "float32", "<stdint.h>", ("f32",)),
        Dtype("s32", 4, "int32_t", "int32", c_header="<stdint.h>"),
        Dtype("u32", 4, "uint32_t", "uint32", c_header="<stdint.h>"),
        Dtype("s16", 2, "int16_t", "int16", c_header="<stdint.h>"),
        Dtype("u16", 2, "uint16_t", "uint16", c_header="<stdint.h>"),
        Dtype("s8", 1, "int8_t", "int8", c_header="<stdint.h>"),
        Dtype("u8", 1, "uint8_t", "uint8", c_header="<stdint.h>"),
    )
}


def dtype(name: str) -> Dtype:
    """Look up a dtype by name; raises KeyError for unknown names."""
    return DTYPES[name]
