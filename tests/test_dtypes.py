"""float32 -> bfloat16 rounding, and the encode/decode/quantize of the dtypes that use it.

bf16 inputs are rounded by ``f32_to_bf16_bits`` before the reference and the kernels see
them, so a wrong rounding would make every bf16 check compare against the wrong values.
Exact cases pin the edges (ties to even, overflow, infinities, NaN, subnormals, signed
zero); a hypothesis property compares every finite float32 with an independent reference
computed with exact fractions.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from morello.dtypes import bf16_bits_to_f32, dtype, f32_to_bf16_bits

BF16_INF = 0x7F80
FINITE_F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
#: Finite float32 values at, just below and just above a bf16 tie (plain ``st.floats``
#: seldom lands on one): high half any finite pattern, often one at an edge (the largest
#: finite, where a tie overflows; zero and the subnormal/normal boundary); low half one of a
#: few edge values.
EDGE_HIGH_HALVES = [0x7F7F, 0xFF7F, 0x7F7E, 0x0000, 0x8000, 0x007F, 0x0080, 0x3F80, 0xBF80]
NEAR_TIES = st.builds(
    lambda high, low: np.array([(high << 16) | low], dtype=np.uint32).view(np.float32).item(),
    st.one_of(
        st.sampled_from(EDGE_HIGH_HALVES),
        st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7F80) != 0x7F80),
    ),
    st.sampled_from([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF]),
)
#: Every finite bf16 bit pattern, both signs (exponent field below 0xFF).
FINITE_BF16_BITS = st.integers(0, 0xFFFF).filter(lambda b: (b & 0x7F80) != 0x7F80)


def f32_of_bits(bits: int) -> float:
    """The float32 value with IEEE bit pattern ``bits`` (as a Python float, exact)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bits_of_f32(x: float) -> int:
    """The IEEE bit pattern of ``x`` as float32 (``x`` must be representable)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def to_bf16(x: float) -> int:
    """``f32_to_bf16_bits`` on one value, as a Python int."""
    out = f32_to_bf16_bits(np.array([x], dtype=np.float32))
    assert out.dtype == np.uint16
    return int(out[0])


def bf16_magnitude(pattern: int) -> Fraction:
    """The exact value of a non-negative bf16 pattern, with the exponent left unbounded.

    The pattern one past the largest finite value (0x7F80, infinity) reads as 2**128: that
    is where round-to-nearest with an unbounded exponent would land, so a value that rounds
    to it overflows.
    """
    exponent, fraction = pattern >> 7, pattern & 0x7F
    if exponent == 0:  # subnormal: 0.fraction * 2**-126
        return Fraction(fraction, 128) * Fraction(2) ** -126
    return Fraction(128 + fraction, 128) * Fraction(2) ** (exponent - 127)


def reference_bf16(x: float) -> int:
    """Round-to-nearest-even of finite float32 ``x`` to a bf16 pattern, by exact arithmetic.

    Of the two bf16 magnitudes bracketing ``|x|`` (truncated toward zero, and the next one
    up) pick the nearer, the one with an even last bit on a tie; rounding up past the
    largest finite bf16 gives infinity.
    """
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    magnitude = Fraction(abs(x))
    # Bisect for the largest pattern whose value is <= |x| (every finite float32 is
    # below 2**128, the value of BF16_INF here, so it lies in [0, BF16_INF)).
    low, high = 0, BF16_INF
    while high - low > 1:
        mid = (low + high) // 2
        if bf16_magnitude(mid) <= magnitude:
            low = mid
        else:
            high = mid
    d_low = magnitude - bf16_magnitude(low)
    d_high = bf16_magnitude(high) - magnitude
    assert d_low >= 0 and d_high > 0
    if d_low < d_high or (d_low == d_high and low % 2 == 0):
        return sign | low
    return sign | high  # high == BF16_INF when the rounding overflows


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(1.0, 0x3F80, id="one"),
        pytest.param(1 + 2**-8, 0x3F80, id="tie-to-even-down"),
        pytest.param(1 + 3 * 2**-8, 0x3F82, id="tie-to-even-up"),
        pytest.param(1 + 2**-8 + 2**-20, 0x3F81, id="just-above-tie"),
        pytest.param(1 + 2**-8 - 2**-20, 0x3F80, id="just-below-tie"),
        pytest.param(1 + 2**-7, 0x3F81, id="exact-odd"),
        pytest.param(-1.0, 0xBF80, id="minus-one"),
        pytest.param(-(1 + 2**-8), 0xBF80, id="negative-tie-to-even-down"),
        pytest.param(-(1 + 3 * 2**-8), 0xBF82, id="negative-tie-to-even-up"),
        pytest.param(-(1 + 2**-8 + 2**-20), 0xBF81, id="negative-just-above-tie"),
        pytest.param(-2.5, 0xC020, id="minus-two-and-a-half"),
        pytest.param(0.0, 0x0000, id="zero"),
        pytest.param(-0.0, 0x8000, id="negative-zero"),
        pytest.param(f32_of_bits(0x7F7FFFFF), BF16_INF, id="max-f32-overflows"),
        pytest.param(f32_of_bits(0xFF7FFFFF), 0x8000 | BF16_INF, id="min-f32-overflows"),
        pytest.param(f32_of_bits(0x7F7F7FFF), 0x7F7F, id="just-below-overflow-tie"),
        pytest.param(f32_of_bits(0x7F7F8000), BF16_INF, id="overflow-tie-goes-to-even-inf"),
        pytest.param(f32_of_bits(0x7F7F0000), 0x7F7F, id="max-bf16"),
        pytest.param(math.inf, BF16_INF, id="inf"),
        pytest.param(-math.inf, 0x8000 | BF16_INF, id="minus-inf"),
        pytest.param(2.0**-149, 0x0000, id="min-f32-subnormal-to-zero"),
        pytest.param(-(2.0**-149), 0x8000, id="negative-min-subnormal-to-minus-zero"),
        pytest.param(2.0**-133, 0x0001, id="min-bf16-subnormal"),
        pytest.param(2.0**-134, 0x0000, id="half-min-bf16-subnormal-ties-to-zero"),
        pytest.param(3 * 2.0**-134, 0x0002, id="subnormal-tie-to-even-up"),
        pytest.param(3 * 2.0**-135, 0x0001, id="subnormal-rounds-up"),
        pytest.param(f32_of_bits(0x007FFFFF), 0x0080, id="max-f32-subnormal-to-min-normal"),
        pytest.param(f32_of_bits(0x00400000), 0x0040, id="subnormal-exact"),
        pytest.param(2.0**-126, 0x0080, id="min-normal"),
    ],
)
def test_dtypes_f32_to_bf16_exact_cases(value: float, expected: int) -> None:
    assert np.float32(value) == value or math.isinf(value), "case must be exact in float32"
    got = to_bf16(value)
    assert got == expected, f"{value!r}: got {got:#06x}, want {expected:#06x}"
    if not math.isinf(value):
        assert got == reference_bf16(value)


@pytest.mark.parametrize(
    "nan_bits",
    [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F80FFFF],
    ids=hex,
)
def test_dtypes_f32_to_bf16_nan_stays_nan(nan_bits: int) -> None:
    f = np.array([nan_bits], dtype=np.uint32).view(np.float32)
    assert np.isnan(f[0])
    bits = f32_to_bf16_bits(f)
    back = bf16_bits_to_f32(bits)
    assert np.isnan(back[0]), f"{nan_bits:#010x} -> {int(bits[0]):#06x}, not a NaN"
    assert (int(bits[0]) >> 15) == (nan_bits >> 31), "the sign of a NaN is kept"


def test_dtypes_f32_to_bf16_keeps_shape_and_elementwise() -> None:
    values = np.array([[1.0, -0.0, 1 + 2**-8], [np.inf, 3 * 2.0**-134, -2.5]], dtype=np.float32)
    got = f32_to_bf16_bits(values)
    assert got.shape == values.shape
    assert got.dtype == np.uint16
    assert got.tolist() == [[0x3F80, 0x8000, 0x3F80], [BF16_INF, 0x0002, 0xC020]]
    # A non-contiguous view is read through its strides, not its raw memory.
    assert f32_to_bf16_bits(values.T).tolist() == got.T.tolist()


def test_dtypes_reference_agrees_with_itself_on_the_exact_cases() -> None:
    # The reference is what the property test trusts; pin it on cases worked by hand.
    assert reference_bf16(1 + 2**-8) == 0x3F80
    assert reference_bf16(1 + 3 * 2**-8) == 0x3F82
    assert reference_bf16(f32_of_bits(0x7F7FFFFF)) == BF16_INF
    assert reference_bf16(-(2.0**-133)) == 0x8001
    assert bf16_magnitude(0x7F7F) == Fraction(255, 128) * Fraction(2) ** 127


@given(st.one_of(FINITE_F32, NEAR_TIES))
def test_dtypes_f32_to_bf16_matches_exact_reference(x: float) -> None:
    got = to_bf16(x)
    want = reference_bf16(x)
    assert got == want, f"{x!r} ({bits_of_f32(x):#010x}): got {got:#06x}, want {want:#06x}"


@given(st.one_of(FINITE_F32, NEAR_TIES))
def test_dtypes_f32_to_bf16_is_truncation_or_next_up(x: float) -> None:
    # The other half of the reference's claim, without fractions: the result is one of
    # the two bracketing patterns, and never further from x than the other one.
    bits = bits_of_f32(x)
    low = bits >> 16
    got = to_bf16(x)
    assert got in (low, low + 1)
    if (got & 0x7FFF) == BF16_INF:
        # Overflow: only from at least halfway between the largest bf16 and 2**128.
        assert abs(x) >= 2.0**127 * (255.5 / 128)
        return
    other = low + 1 if got == low else low
    if (other & 0x7FFF) == BF16_INF:
        assert abs(x) <= 2.0**127 * (255.5 / 128)
        return
    got_value = float(bf16_bits_to_f32(np.array([got], dtype=np.uint16))[0])
    other_value = float(bf16_bits_to_f32(np.array([other], dtype=np.uint16))[0])
    assert abs(got_value - x) <= abs(other_value - x)  # float64 differences are exact here


@given(FINITE_BF16_BITS)
def test_dtypes_bf16_values_round_trip(pattern: int) -> None:
    q = bf16_bits_to_f32(np.array([pattern], dtype=np.uint16))
    assert int(f32_to_bf16_bits(q)[0]) == pattern
    np.testing.assert_array_equal(bf16_bits_to_f32(f32_to_bf16_bits(q)), q)


@given(st.lists(FINITE_F32, min_size=1, max_size=16))
def test_dtypes_bf16_quantize_is_idempotent(values: list[float]) -> None:
    bf16 = dtype("bf16")
    once = bf16.quantize(np.array(values, dtype=np.float32))
    assert once.dtype == np.float32
    twice = bf16.quantize(once)
    np.testing.assert_array_equal(once.view(np.uint32), twice.view(np.uint32))
    # Representable: the low 16 bits of every finite result are zero.
    finite = np.isfinite(once)
    assert not (once[finite].view(np.uint32) & 0xFFFF).any()


def test_dtypes_bf16_encode_decode_round_trip_arrays() -> None:
    bf16 = dtype("bf16")
    assert bf16.np_dtype() == np.uint16
    assert bf16.logical_dtype() == np.float32
    rng = np.random.default_rng(7)
    values = bf16.quantize(rng.uniform(-4.0, 4.0, size=(5, 7)).astype(np.float32))
    stored = bf16.encode(values)
    assert stored.dtype == np.uint16
    assert stored.shape == values.shape
    np.testing.assert_array_equal(stored, values.view(np.uint32) >> 16)
    decoded = bf16.decode(stored)
    assert decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded, values)
    # And from the storage side: every pattern decodes and re-encodes to itself.
    patterns = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16)
    finite = (patterns & 0x7F80) != 0x7F80
    np.testing.assert_array_equal(bf16.encode(bf16.decode(patterns[finite])), patterns[finite])


def test_dtypes_bf16_unit_roundoff_bounds_rounding_error() -> None:
    bf16 = dtype("bf16")
    rng = np.random.default_rng(3)
    values = rng.uniform(-1.0, 1.0, size=10_000).astype(np.float32)
    q = bf16.quantize(values).astype(np.float64)
    relative = np.abs(q - values) / np.abs(values.astype(np.float64))
    assert relative.max() <= bf16.unit_roundoff
    assert relative.max() > bf16.unit_roundoff / 2  # and not loose by a factor of two


def test_dtypes_f32_encode_decode_are_identity() -> None:
    f32 = dtype("f32")
    assert f32.np_dtype() == f32.logical_dtype() == np.float32
    values = np.array([[1.5, -0.0, np.inf], [np.nan, 2.0**-149, 3.4e38]], dtype=np.float32)
    for out in (f32.encode(values), f32.decode(values), f32.quantize(values)):
        assert out.dtype == np.float32
        assert out.shape == values.shape
        np.testing.assert_array_equal(out.view(np.uint32), values.view(np.uint32))
    assert f32.unit_roundoff == 2.0**-24
    # quantize rounds wider values to float32.
    assert f32.quantize(np.array([0.1]))[0] == np.float32(0.1)
