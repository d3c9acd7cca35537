"""Benchmarks synthesized code against its peers and the machine's limits, in one run.

The generated function is timed by a C loop compiled next to it (``timing.py``: no Python in
the timed region). Its peers are the libraries the target names, each in a child process
that holds the library to the target's settings: BLAS libraries, for a matrix product,
called from the same C loop on the same buffers (``peers.py``); and array libraries, for
any op or graph, running it as array code on the same input values (``array_peers.py``:
NumPy's sequence of the ops, JAX's ``jax.jit`` of the whole). The machine's FMA peak and
read bandwidth are measured in the same run (``limits.py``), and the generated code's speed
is reported as a fraction of the one that bounds the Spec. Everything is checked against the
NumPy reference before it is timed, and the generated function and its peers are timed in
the same rounds, one batch of each in turn (``timing.measure_interleaved``). The generated
function is timed on several placements of its buffers within a page (``placement``) and
reported by the median one: where a caller's arrays land decides 4K aliasing, which can
halve the speed of a program that stores to one buffer while it streams another.
"""

from __future__ import annotations

import ctypes
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from morello.codegen import runner
from morello.codegen.array_peers import open_array_peers
from morello.codegen.compile import compile_shared, scratch_folder
from morello.codegen.harness import (
    aligned_empty,
    check,
    random_inputs,
    reference,
    to_buffer,
    tolerance,
)
from morello.codegen.header import lower_to_c
from morello.codegen.limits import LimitsBench, MachineLimits
from morello.codegen.peers import PeerMissing, PeerTiming, ReadyPeer, open_peers, timed_peers
from morello.codegen.timing import PRELUDE, Timing, measure_interleaved, timed_loop
from morello.context import SynthesisContext
from morello.errors import MorelloError
from morello.impl import Impl
from morello.lang.spec_file import Program
from morello.target import Target

#: Peak-loop C type of an output dtype whose arithmetic the peak bounds.
_PEAK_CTYPES = {"f32": "float", "f64": "double"}


def buffer_params(program: Program) -> tuple[list[str], str]:
    """A timing harness's parameters for ``program``'s buffers, and the arguments that pass
    them on: named by position (arg0, arg1, ...), since a spec's own names could clash with
    the harness's locals."""
    params = [*program.params, program.result]
    decl = []
    for i, (_, ts) in enumerate(params):
        const = "const " if i < len(params) - 1 else ""
        decl.append(f"{const}{ts.dtype.c_type} *restrict arg{i}")
    return decl, ", ".join(f"arg{i}" for i in range(len(params)))


def timing_harness(program: Program, ctx: SynthesisContext) -> str:
    """C source of ``double <name>_time(args..., long iters)``: seconds for ``iters`` calls."""
    decl, args = buffer_params(program)
    return timed_loop(f"{program.name}_time", decl, [f"{program.name}({args});"])


#: Buffer placements bench times the generated function on (``placement``), unless the
#: buffers of that many would exceed ``PLACEMENT_BYTES``.
PLACEMENTS = 4
PLACEMENT_BYTES = 256 << 20


def placement(index: int, operand: int) -> int:
    """Where in a 4 KiB page operand ``operand``'s buffer starts in placement ``index``.

    Generated code can run at very different speeds depending on where its buffers lie
    relative to each other within a page: a store to one and a load from another whose
    addresses agree in their low 12 bits wait on each other (4K aliasing; BENCHMARKS.md has
    a product that ran twice as slow so). Where a caller's arrays land is chance, so bench
    times the function on several placements, each operand's offset drawn from a fixed
    sequence (multiples of 64 bytes), the same in every run.
    """
    return ((index * 31 + operand * 17 + 3) * 2654435761 >> 11) % 64 * 64


def placement_count(program: Program, wanted: int = PLACEMENTS) -> int:
    """How many of the ``wanted`` placements to time ``program`` on: at least one, and no
    more than ``PLACEMENT_BYTES`` of buffers."""
    return max(1, min(wanted, PLACEMENT_BYTES // max(1, bytes_per_call(program))))


def median_placement(placed: Sequence[Timing]) -> Timing:
    """One timing of a function timed on several placements: the median placement's median,
    and the spread over every batch of every placement."""
    return Timing(
        statistics.median(t.median for t in placed),
        min(t.low for t in placed),
        max(t.high for t in placed),
    )


def timing_buffers(
    program: Program, ctx: SynthesisContext, where: int | None = None
) -> tuple[list[Any], list[Any]]:
    """Random inputs and a zeroed output in the program's layouts (64-byte aligned; placed
    as ``placement(where, operand)`` says, if given), and pointers to them in parameter
    order; keep the buffers alive while the pointers are used."""
    inputs = random_inputs(program, ctx)
    offset = (lambda i: None) if where is None else (lambda i: placement(where, i))
    bufs = [to_buffer(inputs[n], ts, offset(i)) for i, (n, ts) in enumerate(program.params)]
    _, rts = program.result
    out = aligned_empty(rts.volume, rts.dtype.np_dtype(), offset(len(bufs)))
    out[:] = 0
    bufs.append(out)
    return bufs, [b.ctypes.data_as(ctypes.c_void_p) for b in bufs]


def timed_batch(lib: ctypes.CDLL, name: str, ptrs: Sequence[Any]) -> Any:
    """``batch(iters)``: seconds per call of ``<name>_time`` in ``lib`` over ``iters``
    calls on the buffers at ``ptrs``."""
    fn = getattr(lib, f"{name}_time")
    fn.restype = ctypes.c_double

    def batch(iters: int) -> float:
        return float(fn(*ptrs, ctypes.c_long(iters))) / iters

    return batch


def bytes_per_call(program: Program) -> int:
    """Bytes the function must move per call: every input read once, the output written once.

    A lower bound on memory traffic, the figure a memory-bound kernel's GB/s is measured by.
    """
    return sum(ts.volume * ts.dtype.size for ts in program.spec.operands)


def _peer_bytes(program: Program, ctx: SynthesisContext, input_dtype: str) -> int:
    """``bytes_per_call`` for a peer that reads its inputs as ``input_dtype``."""
    *ins, out = program.spec.operands
    size = ctx.dtype(input_dtype).size
    return sum(t.volume * size for t in ins) + out.volume * out.dtype.size


def require_native(target: Target, command: str = "bench") -> None:
    """Refuse to time code that would not run natively here: timings under an emulator say
    nothing about the target.

    Raises:
        MorelloError: the target's code runs on another architecture.
    """
    if not runner.native_arch(target):
        how = runner.how_to_run(target)
        why = how.reason if how.mode is None else f"its code would run {how.reason}"
        raise MorelloError(
            f"{command} times code only where it runs natively: target {target.name} runs on "
            f"{target.platform.arch} and this machine is {runner.host_arch()} ({why}); "
            "no speed is claimed under emulation (--check works there)"
        )


def bench(
    label: str,
    solved: Sequence[tuple[Program, Impl, float]],
    ctx: SynthesisContext,
    repeats: int = 7,
    min_batch_s: float = 0.05,
) -> list[dict[str, Any]]:
    """Check, time and compare each synthesized function; one row (a dict) per function.

    ``solved`` holds each function's Program, Impl and synthesis seconds. Row keys: ours
    (``seconds`` median, ``seconds_low``/``seconds_high``, ``gflops``, ``gbps``), ``peers``
    by name (seconds, spread, GFLOP/s, the routine that ran and what the library reports),
    ``peers_missing`` (name -> why), ``ratios`` (each peer's median time over ours: above 1
    we are faster), ``best_peer`` and ``ratio`` (the best peer's), ``peak_gflops``,
    ``read_gbps``, ``read_gbps_footprint``, ``bound`` and ``fraction_of_limit``,
    ``synthesis_seconds``, ``threads`` (the most the context allows) and ``threads_used``
    (the most the code runs on; the peers run on those the target's settings give them).

    Raises:
        CheckFailed: the generated code (or a peer) disagrees with the reference.
        MorelloError: the code cannot run natively here (timings under an emulator say
            nothing about the target, so none are taken).
    """
    require_native(ctx.target)
    with scratch_folder("morello-bench-") as workdir:
        return _bench_rows(label, solved, ctx, repeats, min_batch_s, workdir)


def _bench_rows(
    label: str,
    solved: Sequence[tuple[Program, Impl, float]],
    ctx: SynthesisContext,
    repeats: int,
    min_batch_s: float,
    workdir: Path,
) -> list[dict[str, Any]]:
    """``bench``'s rows, its files in ``workdir``."""
    source = lower_to_c(label, [(p, i) for p, i, _ in solved], ctx)
    harness = "".join(timing_harness(p, ctx) for p, _, _ in solved)
    lib = compile_shared(PRELUDE + source.c_text + "\n" + harness, ctx.target, workdir)
    out_dtypes = {p.spec.output.dtype.name for p, _, _ in solved}
    limits_bench = LimitsBench(ctx.target, workdir)
    limits = limits_bench.measure(sorted(_PEAK_CTYPES[d] for d in out_dtypes & _PEAK_CTYPES.keys()))
    rows = []
    for program, impl, seconds in solved:
        check(lib, program, ctx)
        placed, peers = _time_with_peers(lib, program, ctx, repeats, min_batch_s, workdir)
        row = _row(program, ctx, placed, peers, limits, limits_bench)
        row.update(
            spec=f"{label}:{program.name}",
            synthesis_seconds=seconds,
            cost=impl.cost,
            target=ctx.target.name,
            threads=ctx.threads,
            threads_used=impl.threads(),
        )
        rows.append(row)
    return rows


def _time_with_peers(
    lib: Path,
    program: Program,
    ctx: SynthesisContext,
    repeats: int,
    min_batch_s: float,
    workdir: Path,
) -> tuple[list[Timing], list[PeerTiming | PeerMissing]]:
    """Our function's timing on each buffer placement (``placement``) and its peers', all
    their batches interleaved.

    Every peer is started (a child process per library, which checks its routines against
    the reference first), then each round times one batch of ours and one of every peer's
    routine in turn (``timing.measure_interleaved``): a change in the machine's speed during
    the run falls on all of them alike, so it moves the ratios much less than when each was
    timed in a stretch of its own.
    """
    inputs = random_inputs(program, ctx)
    want, allowed = reference(program, inputs, ctx), tolerance(program, inputs, ctx)
    folder = workdir / program.name
    handle = ctypes.CDLL(str(lib))
    count = placement_count(program)
    sets = [timing_buffers(program, ctx, where) for where in range(count)]
    ours = [timed_batch(handle, program.name, ptrs) for _, ptrs in sets]
    with (
        open_peers(program, ctx, inputs, want, allowed, folder / "blas") as blas,
        open_array_peers(program, ctx, inputs, want, allowed, folder / "arrays") as arrays,
    ):
        ready = [*blas, *arrays]
        batches = [b for p in ready if isinstance(p, ReadyPeer) for b in p.batches]
        timings = measure_interleaved([*ours, *batches], repeats, min_batch_s)
    del sets  # alive until the timing is done
    return timings[:count], timed_peers(ready, timings[count:])


def _row(
    program: Program,
    ctx: SynthesisContext,
    placed: Sequence[Timing],
    peers: Sequence[PeerTiming | PeerMissing],
    limits: MachineLimits,
    limits_bench: LimitsBench,
) -> dict[str, Any]:
    opdef = ctx.ruleset.ops[program.spec.op]
    sizes = opdef.sizes([t.shape for t in program.spec.operands])
    assert isinstance(sizes, dict)
    flops = opdef.flops(sizes)
    nbytes = bytes_per_call(program)
    mine = median_placement(placed)
    timed = [p for p in peers if isinstance(p, PeerTiming)]
    best = min(timed, key=lambda p: p.timing.median, default=None)
    footprint_gbps = limits_bench.bandwidth_gbps(nbytes, repeats=3)
    bandwidth = max(limits.read_gbps, footprint_gbps)
    peak = limits.peak_gflops.get(_PEAK_CTYPES.get(program.spec.output.dtype.name, ""))
    memory_s = nbytes / (bandwidth * 1e9)
    compute_s = flops / (peak * 1e9) if peak else 0.0
    return {
        "flops": flops,
        "bytes": nbytes,
        "seconds": mine.median,
        "seconds_low": mine.low,
        "seconds_high": mine.high,
        "gflops": flops / mine.median / 1e9,
        "gbps": nbytes / mine.median / 1e9,
        "placements": [t.median for t in placed],
        "peers": {
            p.name: {
                "library": p.library,
                "routine": p.routine,
                "seconds": p.timing.median,
                "seconds_low": p.timing.low,
                "seconds_high": p.timing.high,
                "gflops": flops / p.timing.median / 1e9,
                "gbps": _peer_bytes(program, ctx, p.dtype) / p.timing.median / 1e9,
                "tried": dict(p.tried),
                "copied_operands": p.copied,
                "detail": dict(p.detail),
            }
            for p in timed
        },
        "peers_missing": {p.name: p.reason for p in peers if isinstance(p, PeerMissing)},
        "ratios": {p.name: p.timing.median / mine.median for p in timed},
        "best_peer": best.name if best else None,
        "ratio": best.timing.median / mine.median if best else None,
        "peak_gflops": peak,
        "read_gbps": limits.read_gbps,
        "read_gbps_footprint": footprint_gbps,
        "bound": "compute" if compute_s >= memory_s else "memory",
        "fraction_of_limit": max(compute_s, memory_s) / mine.median,
    }
