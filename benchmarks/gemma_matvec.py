"""The bf16 vector-matrix multiply of examples/gemma_matvec.lark against BLAS and the memory.

    python benchmarks/gemma_matvec.py --target zen1 [--runs 5]

The kernel reads 64 MiB of bf16 weights per call, so it is bound by memory bandwidth. Each
run is one ``python -m morello bench`` (which checks our code and every peer against NumPy
first), giving in the same run:

* our time, GB/s (bytes of x, w and y per call) and GFLOP/s;
* the peers the target names: for bf16 inputs the libraries' bf16 products where the target's
  CPU has them, and their f32 routines (gemv and gemm, the faster kept) on the same values,
  which read twice the bytes;
* the one-core read bandwidth over a buffer twice the largest cache and over one of the
  call's own size, and our time as a fraction of the higher (the stricter yardstick).

The median of each figure over the runs goes between the ``gemma-matvec`` markers in
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from standard import ROOT, cpu_model, median_of, replace_section, run

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
    benches: list[dict] = []
    for i in range(args.runs):
        benches.append(
            json.loads(
                run([*base, "bench", "--target", args.target, str(SPEC), "--db", str(db), "--json"])
            )
        )
        b = benches[-1]
        peers = ", ".join(f"{n} {p['gbps']:.1f}" for n, p in b["peers"].items())
        print(
            f"run {i + 1}: {b['gbps']:.1f} GB/s ({b['gflops']:.1f} GFLOP/s); peers (GB/s of "
            f"their own bytes) {peers}; ratio {b['ratio']:.2f} against {b['best_peer']}; "
            f"read bandwidth {b['read_gbps']:.1f} (large) / {b['read_gbps_footprint']:.1f} "
            f"(64 MiB) GB/s; {b['fraction_of_limit']:.0%}",
            file=sys.stderr,
        )
    shutil.rmtree(db.parent, ignore_errors=True)  # the cold table and the C, done with
    peer_names = sorted({n for b in benches for n in b["peers"]})
    missing = {n: why for b in benches for n, why in b["peers_missing"].items()}
    lines = [
        BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()} (single thread), target "
        f"{args.target}, with `python benchmarks/gemma_matvec.py --target {args.target} "
        f"--runs {args.runs}`; medians of {args.runs} bench runs, each timing 7 batches. Every "
        "run checked our output and each peer's against NumPy first.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| Morello, bf16 weights | {median_of(benches, 'seconds') * 1e3:.2f} ms per call, "
        f"{median_of(benches, 'gbps'):.1f} GB/s, {median_of(benches, 'gflops'):.1f} GFLOP/s |",
    ]
    for name in peer_names:
        times = [b["peers"][name]["seconds"] for b in benches if name in b["peers"]]
        p = next(b["peers"][name] for b in benches if name in b["peers"])
        lines.append(
            f"| peer {name} ({p['routine']}) | {statistics.median(times) * 1e3:.2f} ms per call, "
            f"{statistics.median(b['peers'][name]['gflops'] for b in benches):.1f} GFLOP/s |"
        )
    for name, why in sorted(missing.items()):
        lines.append(f"| peer {name} | not timed: {why} |")
    lines += [
        f"| ratio to the best peer (time) | **{median_of(benches, 'ratio'):.2f}x** (runs: "
        + ", ".join(f"{b['ratio']:.2f} vs {b['best_peer']}" for b in benches)
        + ") |",
        f"| one-core read bandwidth, large buffer / 64 MiB (the call's size) | "
        f"{median_of(benches, 'read_gbps'):.1f} / "
        f"{median_of(benches, 'read_gbps_footprint'):.1f} GB/s |",
        f"| fraction of the read bandwidth (of the higher) | "
        f"**{median_of(benches, 'fraction_of_limit'):.0%}** (runs: "
        + ", ".join(f"{b['fraction_of_limit']:.0%}" for b in benches)
        + ") |",
        f"| cold synthesis | {stats['seconds']:.1f} s, {stats['specs_visited']} Specs |",
        END,
    ]
    heading = "bf16 vector-matrix multiply (examples/gemma_matvec.lark)"
    replace_section(Path(args.out), BEGIN, END, lines, heading)
    return 0


if __name__ == "__main__":
    sys.exit(main())
