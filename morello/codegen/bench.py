"""Benchmarks synthesized code against its peer (NumPy) in the same run.

The kernel is timed by a C loop compiled next to it (no Python in the timed region); the
peer is NumPy on the same shapes and dtypes in a child process whose BLAS is held to one
thread and to the target's peer settings (the target names the environment, e.g. which
kernels its BLAS may use). Each side runs warm-up calls, then ``repeats`` timed batches
of enough calls to last ``min_batch_s``; we report the median and spread per call.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

from morello.codegen.harness import aligned_empty, random_inputs, to_buffer
from morello.context import SynthesisContext
from morello.lang.spec_file import Program


@attrs.frozen
class Timing:
    """Seconds per call: median and the spread (min, max) over repeated batches."""

    median: float
    low: float
    high: float


def timing_harness(program: Program, ctx: SynthesisContext) -> str:
    """C source of ``double <name>_time(args..., long iters)``: seconds for ``iters`` calls."""
    params = [*program.params, program.result]
    decl = []
    call = []
    for i, (name, ts) in enumerate(params):
        const = "const " if i < len(params) - 1 else ""
        decl.append(f"{const}{ctx.dtype(ts.dtype).c_type} *restrict {name}")
        call.append(name)
    return "\n".join(
        [
            f"double {program.name}_time({', '.join(decl)}, long iters)",
            "{",
            "    struct timespec t0, t1;",
            "    clock_gettime(CLOCK_MONOTONIC, &t0);",
            "    for (long it = 0; it < iters; it++) {",
            f"        {program.name}({', '.join(call)});",
            '        __asm__ __volatile__("" ::: "memory");',
            "    }",
            "    clock_gettime(CLOCK_MONOTONIC, &t1);",
            "    return (double)(t1.tv_sec - t0.tv_sec)",
            "        + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);",
            "}",
            "",
        ]
    )


HARNESS_PRELUDE = "#define _POSIX_C_SOURCE 199309L\n#include <time.h>\n"


def time_kernel(
    lib_path: Path,
    program: Program,
    ctx: SynthesisContext,
    repeats: int = 7,
    min_batch_s: float = 0.05,
) -> Timing:
    """Time the compiled kernel (which must include ``timing_harness``) per call."""
    lib = ctypes.CDLL(str(lib_path))
    fn = getattr(lib, f"{program.name}_time")
    fn.restype = ctypes.c_double
    inputs = random_inputs(program, ctx)
    bufs = [to_buffer(inputs[n], ts, ctx) for n, ts in program.params]
    _, rts = program.result
    out = aligned_empty(rts.volume, ctx.dtype(rts.dtype).np_dtype())
    out[:] = 0
    ptrs = [b.ctypes.data_as(ctypes.c_void_p) for b in (*bufs, out)]

    def batch(iters: int) -> float:
        return float(fn(*ptrs, ctypes.c_long(iters))) / iters

    return _measure(batch, repeats, min_batch_s)


def bytes_per_call(program: Program, ctx: SynthesisContext) -> tuple[int, int]:
    """Bytes the function must move per call in its own dtypes, and the peer's in its dtypes.

    Every input is read once and the output written once: a lower bound on memory traffic,
    the figure a memory-bound kernel's GB/s is measured by.
    """
    mine = peer = 0
    for ts in program.spec.operands:
        dt = ctx.dtype(ts.dtype)
        mine += ts.volume * dt.size
        peer += ts.volume * dt.logical_dtype().itemsize
    return mine, peer


def _measure(batch, repeats: int, min_batch_s: float) -> Timing:  # type: ignore[no-untyped-def]
    batch(1)
    iters = 1
    while True:
        t = batch(iters) * iters
        if t >= min_batch_s or iters >= 1 << 30:
            break
        iters = max(iters * 2, int(iters * min_batch_s / max(t, 1e-9)))
    samples = [batch(iters) for _ in range(repeats)]
    return Timing(statistics.median(samples), min(samples), max(samples))


_PEER_SCRIPT = r"""
import json, statistics, sys, time
import numpy as np
req = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
arrays = [rng.uniform(-1, 1, size=s).astype(d) for s, d in zip(req["shapes"], req["dtypes"])]
out = np.zeros(req["out_shape"], dtype=req["out_dtype"])
subs = req["einsum"]
if req["matmul"]:
    def call():
        np.matmul(arrays[0], arrays[1], out=out)
else:
    path = np.einsum_path(subs, *arrays, optimize="optimal")[0]
    def call():
        np.einsum(subs, *arrays, out=out, optimize=path)
def batch(n):
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - t0) / n
batch(1)
iters = 1
while True:
    t = batch(iters) * iters
    if t >= req["min_batch_s"] or iters >= 1 << 30:
        break
    iters = max(iters * 2, int(iters * req["min_batch_s"] / max(t, 1e-9)))
samples = [batch(iters) for _ in range(req["repeats"])]
print(json.dumps({"median": statistics.median(samples), "low": min(samples),
                  "high": max(samples)}))
"""


def time_peer(
    program: Program,
    ctx: SynthesisContext,
    env: Mapping[str, str],
    repeats: int = 7,
    min_batch_s: float = 0.05,
) -> Timing:
    """Time NumPy on the same shapes and dtypes in a child process with ``env`` set.

    A dtype NumPy lacks is replaced by the type of its values (bf16 by float32), so a bf16
    kernel is compared with NumPy's float32 computation of the same shape.
    """
    opdef = ctx.ruleset.ops[program.spec.op]
    letters = {v: chr(ord("a") + i) for i, v in enumerate(opdef.index_vars)}
    subs = ",".join("".join(letters[i] for i in acc.indices) for acc in opdef.inputs)
    subs += "->" + "".join(letters[i] for i in opdef.output.indices)
    ins = program.spec.operands[:-1]
    # A two-operand contraction "ab,bc->ac" is exactly what BLAS gemm computes.
    is_matmul = len(opdef.inputs) == 2 and len(opdef.reduction_vars) == 1 and subs == "ab,bc->ac"
    req = {
        "shapes": [list(t.shape) for t in ins],
        "dtypes": [ctx.dtype(t.dtype).logical_dtype().name for t in ins],
        "out_shape": list(program.spec.output.shape),
        "out_dtype": ctx.dtype(program.spec.output.dtype).logical_dtype().name,
        "einsum": subs,
        "matmul": is_matmul,
        "repeats": repeats,
        "min_batch_s": min_batch_s,
    }
    child_env = {**os.environ, **env}
    proc = subprocess.run(
        [sys.executable, "-c", _PEER_SCRIPT, json.dumps(req)],
        capture_output=True,
        text=True,
        env=child_env,
        check=True,
    )
    data = json.loads(proc.stdout)
    return Timing(data["median"], data["low"], data["high"])
