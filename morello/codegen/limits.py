"""The machine's own limits, measured in the same run as a benchmark.

Two figures bound what any code for a target can reach on one core of this machine:

* the **FMA peak**: a generated C loop of independent fused multiply-adds on vectors of the
  target's widest vector register (GCC vector extensions, contracted to FMAs), enough
  accumulators to hide the latency; FLOP/s counts 2 per lane per FMA;
* the **read bandwidth**: a buffer larger than twice the biggest cache this machine reports
  (at least 256 MiB), written once so every page is backed, then read in passes that add
  every loaded vector into independent accumulators. Each pass reads the buffer as 1, 2, 4 or
  8 equal parts at once (a core's prefetchers follow several streams); the best median wins.
  The same measure over a buffer of a given size (a Spec's footprint, which may fit a cache)
  gives the bandwidth its data sees.

A benchmark reports its figure as a fraction of the bound that applies (a roofline: the
slower of compute at the peak and traffic at the bandwidth). Knows no target by name.
"""

from __future__ import annotations

import ctypes
import statistics
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np

from morello.codegen.compile import compile_shared
from morello.codegen.harness import aligned_empty
from morello.codegen.timing import PRELUDE, timed_loop
from morello.target import Target

#: Streams each bandwidth pass may read at once; the best is the machine's figure.
STREAMS: tuple[int, ...] = (1, 2, 4, 8)
#: Bytes one bandwidth loop step reads from each stream: a 64-byte line.
_LINE = 64
_MIN_BUFFER = 256 << 20


@attrs.frozen
class MachineLimits:
    """Measured limits of one core: FMA peak per float C type, and read bandwidth."""

    peak_gflops: dict[str, float]
    read_gbps: float


def vector_bytes(target: Target) -> int:
    """The widest vector register the target declares (a scalar's 8 bytes if none)."""
    widths = [w for lv in target.levels for w in lv.vector_bytes]
    return max(widths, default=8)


def accumulators(target: Target) -> int:
    """Independent accumulators of the peak loop: the vector registers less a few, at most 16."""
    regs = [lv.capacity for lv in target.levels if lv.vector_bytes]
    return max(4, min(16, (regs[0] if regs else 16) - 4))


def limits_source(target: Target) -> str:
    """C source of the FMA-peak loops (float and double) and the bandwidth passes."""
    vb, acc = vector_bytes(target), accumulators(target)
    parts = [PRELUDE, "#include <stddef.h>\n#include <stdint.h>\n"]
    for ctype in ("float", "double"):
        vt = f"v_{ctype}"
        parts.append(f"typedef {ctype} {vt} __attribute__((vector_size({vb})));")
        setup = [f"{vt} x = ({vt}){{0}} + ({ctype})0.999, y = ({vt}){{0}} + ({ctype})0.001;"]
        setup += [f"{vt} a{i} = ({vt}){{0}} + seed + ({ctype}){i};" for i in range(acc)]
        finish = [f"{vt} s = " + " + ".join(f"a{i}" for i in range(acc)) + ";"]
        finish.append(f"for (int l = 0; l < {vb} / (int)sizeof({ctype}); l++) *sink += s[l];")
        body = [f"a{i} = a{i} * x + y;" for i in range(acc)]
        parts.append(
            timed_loop(f"peak_{ctype}", [f"{ctype} seed", f"{ctype} *sink"], body, setup, finish)
        )
    per_line = max(1, _LINE // vb)
    parts.append(f"typedef int64_t v_int __attribute__((vector_size({vb})));")
    for streams in STREAMS:
        # One pass over buf as `streams` equal parts at once, a line of each in turn.
        loads = [
            f"    acc{(s * per_line + i) % 8} += "
            f"*(const v_int *)(buf + {s} * part + off + {i * vb});"
            for s in range(streams)
            for i in range(per_line)
        ]
        parts.append(
            timed_loop(
                f"read_{streams}",
                ["const unsigned char *buf", "size_t bytes", "int64_t *sink"],
                [f"for (size_t off = 0; off < part; off += {_LINE}) {{", *loads, "}"],
                [
                    f"size_t part = bytes / {streams};",
                    "v_int " + ", ".join(f"acc{i} = {{0}}" for i in range(8)) + ";",
                ],
                [
                    "v_int s = " + " + ".join(f"acc{i}" for i in range(8)) + ";",
                    f"for (int l = 0; l < {vb} / 8; l++) *sink += s[l];",
                ],
            )
        )
    return "\n".join(parts)


def largest_cache_bytes() -> int:
    """The biggest CPU cache this machine reports (sysfs), or 0 if it reports none."""
    best = 0
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = size.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best


class LimitsBench:
    """The limits loops, compiled for ``target``; the methods run them."""

    def __init__(self, target: Target, workdir: Path) -> None:
        self.target = target
        # The peak loop is written as a multiply and an add; contraction makes each an FMA.
        flags = (*target.compiler.flags, "-ffp-contract=fast")
        build = attrs.evolve(target, compiler=attrs.evolve(target.compiler, flags=flags))
        lib = compile_shared(limits_source(target), build, workdir, name="limits")
        self.lib = ctypes.CDLL(str(lib))

    def peak_gflops(self, ctype: str = "float", repeats: int = 5, min_s: float = 0.05) -> float:
        """Median FLOP/s (in G) of the independent-FMA loop over ``ctype`` vectors."""
        fn = getattr(self.lib, f"peak_{ctype}")
        scalar = ctypes.c_float if ctype == "float" else ctypes.c_double
        fn.restype = ctypes.c_double
        fn.argtypes = [scalar, ctypes.POINTER(scalar), ctypes.c_long]
        sink = scalar(0)
        lanes = vector_bytes(self.target) // ctypes.sizeof(scalar)
        acc = accumulators(self.target)
        iters = 1 << 12
        while fn(1.0, ctypes.byref(sink), iters) < min_s and iters < 1 << 40:
            iters *= 2
        samples = [fn(1.0, ctypes.byref(sink), iters) for _ in range(repeats)]
        return 2 * lanes * acc * iters / statistics.median(samples) / 1e9

    def measure(self, float_ctypes: Sequence[str] = ("float",)) -> MachineLimits:
        """The FMA peak for each C float type and the large-buffer read bandwidth."""
        nbytes = max(_MIN_BUFFER, 2 * largest_cache_bytes())
        return MachineLimits(
            peak_gflops={c: self.peak_gflops(c) for c in float_ctypes},
            read_gbps=self.bandwidth_gbps(nbytes, repeats=3),
        )

    def bandwidth_gbps(self, nbytes: int, repeats: int = 5, min_s: float = 0.02) -> float:
        """Best median read GB/s over a buffer of ``nbytes`` (rounded to whole lines)."""
        step = _LINE * max(STREAMS)
        nbytes = max(step, nbytes // step * step)
        buf = aligned_empty(nbytes, np.dtype(np.uint8))
        buf[:] = 1  # every page written, so each is backed by its own frame
        fns = {s: getattr(self.lib, f"read_{s}") for s in STREAMS}
        for fn in fns.values():
            fn.restype = ctypes.c_double
            fn.argtypes = [
                ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64), ctypes.c_long
            ]  # fmt: skip
        sink = ctypes.c_int64(0)
        ptr = buf.ctypes.data
        fns[1](ptr, nbytes, ctypes.byref(sink), 1)  # warm-up pass
        passes = 1
        while fns[1](ptr, nbytes, ctypes.byref(sink), passes) < min_s and passes < 1 << 20:
            passes *= 2
        samples: dict[int, list[float]] = {s: [] for s in STREAMS}
        for _ in range(repeats):
            for s, fn in fns.items():  # interleaved, so every variant sees the same noise
                samples[s].append(fn(ptr, nbytes, ctypes.byref(sink), passes) / passes)
        return max(nbytes / statistics.median(v) / 1e9 for v in samples.values())
