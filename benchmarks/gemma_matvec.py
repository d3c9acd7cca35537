"""The bf16 vector-matrix multiply of examples/gemma_matvec.lark against NumPy and the memory.

    python benchmarks/gemma_matvec.py --target zen1 [--runs 5]

The kernel reads 64 MiB of bf16 weights per call, so it is bound by memory bandwidth. Each run
measures, back to back so they see the same machine load:

* the single-core read bandwidth (benchmarks/read_bandwidth.py: the best of sequential reads
  and 2, 4 or 8 concurrent streams) over 64 MiB (the size the kernel streams; above this
  machine's L3) and over 512 MiB; the higher of the two medians is the yardstick, so the
  fraction reported is the stricter one;
* ``python -m morello bench`` on the example (which checks against NumPy first), giving our
  GB/s (bytes of x, w and y per call) and the ratio to NumPy's float32 matvec of the same
  shape in the same run.

The median of each figure over the runs goes between the ``gemma-matvec`` markers in
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import read_bandwidth
from standard import ROOT, cpu_model, replace_section, run

BEGIN = "<!-- gemma-matvec:begin -->"
END = "<!-- gemma-matvec:end -->"
SPEC = ROOT / "examples" / "gemma_matvec.lark"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--runs", type=int, default=5, help="runs (median kept)")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()

    db = Path(tempfile.mkdtemp(prefix="morello-gemma-")) / "memo.sqlite3"
    base = [sys.executable, "-m", "morello"]
    stats = json.loads(
        run([*base, "--target", args.target, str(SPEC), "--db", str(db), "--stats", "--json",
             "-o", str(db.parent / "gemma_matvec.c")])
    )  # fmt: skip
    bw64: list[float] = []
    bw512: list[float] = []
    benches: list[dict] = []
    for i in range(args.runs):
        bw64.append(read_bandwidth.measure(64, 11)["gbps_best_median"])
        bw512.append(read_bandwidth.measure(512, 5)["gbps_best_median"])
        benches.append(
            json.loads(
                run([*base, "bench", "--target", args.target, str(SPEC), "--db", str(db), "--json"])
            )
        )
        b = benches[-1]
        print(
            f"run {i + 1}: {b['gbps']:.1f} GB/s ({b['gflops']:.1f} GFLOP/s), NumPy f32 "
            f"{b['peer_gbps']:.1f} GB/s, ratio {b['ratio']:.2f}; read bandwidth "
            f"{bw64[-1]:.1f} (64 MiB) / {bw512[-1]:.1f} (512 MiB) GB/s",
            file=sys.stderr,
        )
    med = {
        k: statistics.median(float(b[k]) for b in benches)
        for k in ("gbps", "gflops", "peer_gbps", "peer_gflops", "ratio", "seconds")
    }
    yard64, yard512 = statistics.median(bw64), statistics.median(bw512)
    yardstick = max(yard64, yard512)
    fraction = med["gbps"] / yardstick
    print(
        f"gemma_matvec: {med['gbps']:.1f} GB/s = {fraction:.0%} of {yardstick:.1f} GB/s read "
        f"bandwidth; {med['ratio']:.2f}x NumPy f32",
        file=sys.stderr,
    )
    lines = [
        BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()} (single thread), target "
        f"{args.target}, with `python benchmarks/gemma_matvec.py --target {args.target} "
        f"--runs {args.runs}`; medians of {args.runs} runs, each timing 7 batches. Every run "
        "checked the output against NumPy first.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| Morello, bf16 weights | {med['seconds'] * 1e3:.2f} ms per call, "
        f"{med['gbps']:.1f} GB/s, {med['gflops']:.1f} GFLOP/s |",
        f"| NumPy float32 matvec, same shape, same runs | {med['peer_gbps']:.1f} GB/s, "
        f"{med['peer_gflops']:.1f} GFLOP/s |",
        f"| ratio to NumPy (time) | **{med['ratio']:.2f}x** (runs: "
        + ", ".join(f"{b['ratio']:.2f}" for b in benches)
        + ") |",
        f"| single-core read bandwidth (best of 1, 2, 4, 8 streams), 64 MiB / 512 MiB | "
        f"{yard64:.1f} / "
        f"{yard512:.1f} GB/s |",
        f"| fraction of the read bandwidth (of the higher, {yardstick:.1f} GB/s) | "
        f"**{fraction:.0%}** (runs: "
        + ", ".join(
            f"{b['gbps'] / max(x, y):.0%}" for b, x, y in zip(benches, bw64, bw512, strict=True)
        )
        + ") |",
        f"| cold synthesis | {stats['seconds']:.1f} s, {stats['specs_visited']} Specs |",
        END,
    ]
    heading = "bf16 vector-matrix multiply (examples/gemma_matvec.lark)"
    replace_section(Path(args.out), BEGIN, END, lines, heading)
    return 0


if __name__ == "__main__":
    sys.exit(main())
