"""Single-core memory read bandwidth: the yardstick for memory-bound kernels.

    python benchmarks/read_bandwidth.py                      # 11 passes over 512 MiB
    python benchmarks/read_bandwidth.py --size-mib 1024 --repeats 21 --json

Compiles ``read_bandwidth.c`` (next to this file) into a temporary folder with
``-O3 -mavx2 -mfma``, runs it, and reports GB/s (1e9 bytes per second) of plain sequential
reads: the median, minimum and maximum over the timed passes. The C program also times a
variant reading two halves of the buffer at once; its median, and the median of the faster
variant in each pass, are reported beside the headline figure, never instead of it.

Import ``measure`` to use the figure from other scripts. Errors (no compiler, a failed
compile or run) print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

C_SOURCE = Path(__file__).resolve().with_name("read_bandwidth.c")
CFLAGS = ["-O3", "-mavx2", "-mfma"]


class BandwidthError(Exception):
    """The benchmark could not be compiled or run; the message says why, in one line."""


def _last_line(text: str) -> str:
    """The last non-blank line of a compiler's or program's output, for a one-line message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def compile_benchmark(cc: str, out_dir: Path) -> Path:
    """Compile the C program into ``out_dir`` with ``cc`` and return the executable's path."""
    if shutil.which(cc) is None:
        raise BandwidthError(f"C compiler not found: {cc}")
    exe = out_dir / "read_bandwidth"
    cmd = [cc, *CFLAGS, "-o", str(exe), str(C_SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BandwidthError(f"compiling {C_SOURCE.name} failed: {_last_line(proc.stderr)}")
    return exe


def run_benchmark(exe: Path, size_mib: int, repeats: int) -> dict:
    """Run the compiled program; return its JSON (bytes, per-pass seconds of each variant)."""
    proc = subprocess.run(
        [str(exe), str(size_mib), str(repeats)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BandwidthError(
            f"{exe.name} exited with status {proc.returncode}: {_last_line(proc.stderr)}"
        )
    return json.loads(proc.stdout)


def summarize(raw: dict, size_mib: int, repeats: int) -> dict:
    """GB/s figures from the program's per-pass times.

    ``gbps_median`` and its spread are plain sequential reads; ``gbps_streams_median`` maps
    each stream count to its median; ``gbps_best_median`` is the best median of all variants,
    the machine's single-core read bandwidth.
    """
    nbytes = raw["bytes"]
    seq = [nbytes / s / 1e9 for s in raw["seconds"]]
    streams = {
        int(k): statistics.median(nbytes / s / 1e9 for s in v)
        for k, v in raw["seconds_streams"].items()
    }
    return {
        "size_mib": size_mib,
        "repeats": repeats,
        "gbps_median": statistics.median(seq),
        "gbps_max": max(seq),
        "gbps_min": min(seq),
        "gbps_streams_median": streams,
        "gbps_best_median": max(statistics.median(seq), *streams.values()),
    }


def measure(size_mib: int = 512, repeats: int = 11, cc: str = "gcc") -> dict:
    """Measure single-core read bandwidth over a ``size_mib`` MiB buffer, ``repeats`` passes.

    Returns ``size_mib``, ``repeats``, ``gbps_median``, ``gbps_max`` and ``gbps_min`` (plain
    sequential reads), ``gbps_streams_median`` (by stream count) and ``gbps_best_median``.
    Raises BandwidthError when the program cannot be compiled or run.
    """
    if size_mib < 1 or repeats < 1:
        raise ValueError(f"size_mib and repeats must be positive, got {size_mib}, {repeats}")
    with tempfile.TemporaryDirectory(prefix="read-bandwidth-") as tmp:
        exe = compile_benchmark(cc, Path(tmp))
        raw = run_benchmark(exe, size_mib, repeats)
    return summarize(raw, size_mib, repeats)


def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Command line: print a one-line summary, or the result as JSON with ``--json``."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mib", type=_positive_int, default=512, help="buffer size (MiB)")
    ap.add_argument("--repeats", type=_positive_int, default=11, help="timed passes")
    ap.add_argument("--cc", default="gcc", help="C compiler (default: gcc)")
    ap.add_argument("--json", action="store_true", help="print the result as one line of JSON")
    args = ap.parse_args(argv)
    try:
        result = measure(args.size_mib, args.repeats, args.cc)
    except BandwidthError as err:
        print(f"read_bandwidth: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        streams = ", ".join(
            f"{k} streams {v:.1f}" for k, v in result["gbps_streams_median"].items()
        )
        print(
            f"single-core read bandwidth: {result['gbps_best_median']:.1f} GB/s, the best "
            f"median of {args.repeats} passes over {args.size_mib} MiB (sequential "
            f"{result['gbps_median']:.1f}, min {result['gbps_min']:.1f}, max "
            f"{result['gbps_max']:.1f}; {streams})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
