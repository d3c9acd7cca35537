"""Runs compiled code on random inputs (``runner``: natively or emulated), compares with NumPy.

Shared by ``--check``, the benchmarks and the tests, so they cannot drift apart. The
reference comes from the op's index notation; buffers are filled through the operands'
layouts, so any layout is handled the same way.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np

from morello.codegen import runner
from morello.context import SynthesisContext
from morello.errors import CheckFailed
from morello.lang.spec_file import Program
from morello.spec import TensorSpec


def buffer_offsets(ts: TensorSpec) -> np.ndarray:
    """For each logical index of ``ts`` (C order), its offset in the buffer."""
    # (a scalar, rank 0, has one index: no coordinates, offset 0)
    idx = np.indices(ts.shape).reshape(len(ts.shape), ts.volume)
    off = np.zeros(idx.shape[1], dtype=np.int64)
    for coord_dim, div, mod, stride in ts.layout.offset_terms(ts.shape, list(range(len(ts.shape)))):
        v = idx[int(coord_dim)] // div  # type: ignore[call-overload]
        if mod is not None:
            v = v % mod
        off += v * stride
    return off.reshape(ts.shape)


#: Alignment of the buffers handed to generated code: a cache line, so timings do not depend
#: on where NumPy happened to place an array (it only promises 16 bytes).
BUFFER_ALIGN = 64
#: The page size whose offsets ``aligned_empty`` may choose: addresses 4 KiB apart share a
#: cache set and, on x86, look alike to the store-to-load forwarding check ("4K aliasing").
PAGE_BYTES = 4096


def aligned_empty(
    count: int, dtype: np.dtype[np.generic], page_offset: int | None = None
) -> np.ndarray:
    """An uninitialized 1-D array of ``count`` elements starting on a BUFFER_ALIGN boundary,
    or ``page_offset`` bytes (a multiple of BUFFER_ALIGN) past the start of a 4 KiB page."""
    nbytes = max(count, 1) * dtype.itemsize
    if page_offset is None:
        raw = np.empty(nbytes + BUFFER_ALIGN, dtype=np.uint8)
        start = -raw.ctypes.data % BUFFER_ALIGN
    else:
        assert page_offset % BUFFER_ALIGN == 0 and 0 <= page_offset < PAGE_BYTES
        raw = np.empty(nbytes + 2 * PAGE_BYTES, dtype=np.uint8)
        start = -raw.ctypes.data % PAGE_BYTES + page_offset
    return raw[start : start + nbytes].view(dtype)[:count]


def to_buffer(arr: np.ndarray, ts: TensorSpec, page_offset: int | None = None) -> np.ndarray:
    """The flat, aligned buffer holding logical array ``arr`` in ``ts``'s layout (at
    ``page_offset`` in a page, if given: see ``aligned_empty``)."""
    dt = ts.dtype
    buf = aligned_empty(ts.volume, dt.np_dtype(), page_offset)
    buf[:] = 0
    buf[buffer_offsets(ts).ravel()] = dt.encode(arr).ravel()
    return buf


def from_buffer(buf: np.ndarray, ts: TensorSpec) -> np.ndarray:
    """The logical array stored in flat ``buf`` in ``ts``'s layout."""
    return ts.dtype.decode(buf[buffer_offsets(ts)])


def random_inputs(program: Program, ctx: SynthesisContext, seed: int = 0) -> dict[str, np.ndarray]:
    """Logical input arrays with values in [-1, 1), keyed by parameter name.

    Values are rounded to the parameter's dtype (bf16 with round-to-nearest-even), so the
    reference sees exactly what the kernel reads.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, ts in program.params:
        values = rng.uniform(-1.0, 1.0, size=ts.shape).astype(np.float32)
        out[name] = ts.dtype.quantize(values)
    return out


def run(
    lib_path: Path, program: Program, inputs: dict[str, np.ndarray], ctx: SynthesisContext
) -> np.ndarray:
    """Call the compiled function once (natively or under the target's emulator, see
    ``runner``); returns the logical output array."""
    buffers = [to_buffer(inputs[name], ts) for name, ts in program.params]
    _, rts = program.result
    dt = rts.dtype
    out = aligned_empty(rts.volume, dt.np_dtype())
    out[:] = dt.encode(np.full(rts.volume, np.nan, dtype=dt.logical_dtype()))
    runner.call(lib_path, program.name, [*buffers, out], ctx.target)
    return from_buffer(out, rts)


@attrs.frozen
class Comparison:
    """Outcome of comparing an output with its reference."""

    max_abs_error: float
    max_allowed: float
    first_bad: tuple[int, ...] | None

    @property
    def ok(self) -> bool:
        """Whether every element is within its tolerance."""
        return self.first_bad is None


def reference(program: Program, inputs: dict[str, np.ndarray], ctx: SynthesisContext) -> np.ndarray:
    """The op's NumPy reference on ``inputs``."""
    opdef = ctx.ruleset.ops[program.spec.op]
    args = [inputs[n] for n in program.operand_params[:-1]]
    out_shape = np.zeros(program.spec.output.shape)
    return opdef.reference(args, out_shape)


def tolerance(program: Program, inputs: dict[str, np.ndarray], ctx: SynthesisContext) -> np.ndarray:
    """Per-element error bound: twice the first-order bound the op's index notation gives
    for these inputs (``OpDef.error_bound``; for a graph, statement by statement), plus a
    tiny floor of 8 u.

    ``u`` is the unit roundoff of the output dtype. The bound follows each value through the
    expression: sums add errors, products and quotients weigh them by magnitudes, ``exp``
    scales its argument's error by its value and adds the error its kernels are stated to
    stay within (``index_notation.FUNC_ROUNDINGS``), every operation rounds once, and a
    reduction of n terms adds n u times the sum of their magnitudes (the classic bound for
    recursive summation; fused multiply-adds only tighten it). The factor of two leaves room
    for implementations that round a little more often than the notation (a quotient as a
    reciprocal and a product, a sum split into lane-wise partial sums).

    Inputs narrower than the output (bf16 into f32) need nothing more: the inputs are exact
    bf16 values, each product of two has at most 16 significant bits and so is exact in f32,
    and the only rounding left is the f32 accumulation the bound covers. The reference is
    computed in float64 from the same bf16 values.
    """
    opdef = ctx.ruleset.ops[program.spec.op]
    spec = program.spec
    u = spec.output.dtype.unit_roundoff
    args = [np.asarray(inputs[name], dtype=np.float64) for name in program.operand_params[:-1]]
    _, err = opdef.error_bound(args, [np.zeros_like(a) for a in args], spec.output.shape, u)
    return 2 * err + 8 * u


def compare(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> Comparison:
    """Elementwise comparison against per-element bounds.

    An element equal to its reference is right whatever its bound: an infinity of the same
    sign (``x / 0``), or NaN where the reference is NaN (``0 / 0``), whose bounds are NaN.
    Any other NaN, in the value, the error or the bound, is wrong.
    """
    got64 = got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        same = (got64 == want) | (np.isnan(got64) & np.isnan(want))
        err = np.where(same, 0.0, np.abs(got64 - want))
        bad = ~(same | (err <= allowed))
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    max_err = float(np.nanmax(err)) if np.isfinite(err).any() else float("inf")
    if np.isnan(err).any():
        max_err = float("inf")
    bounds = allowed[~np.isnan(allowed)]
    return Comparison(max_err, float(bounds.max()) if bounds.size else float("nan"), first)


def check(lib_path: Path, program: Program, ctx: SynthesisContext, seed: int = 0) -> Comparison:
    """Run the compiled ``program`` on random inputs and compare with the reference.

    Raises:
        CheckFailed: some element is outside its tolerance.
    """
    inputs = random_inputs(program, ctx, seed)
    got = run(lib_path, program, inputs, ctx)
    want = reference(program, inputs, ctx)
    result = compare(got, want, tolerance(program, inputs, ctx))
    if not result.ok:
        assert result.first_bad is not None
        idx = ", ".join(map(str, result.first_bad))
        raise CheckFailed(
            f"check failed for {program.name}: max abs error {result.max_abs_error:.3g} "
            f"(allowed up to {result.max_allowed:.3g}); first mismatch at [{idx}]: "
            f"got {got[result.first_bad]:.7g}, expected {want[result.first_bad]:.7g}"
        )
    return result
