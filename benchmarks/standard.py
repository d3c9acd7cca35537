"""The standard benchmark set: bench every shape, rewrite the table in BENCHMARKS.md.

    python benchmarks/standard.py --target zen1            # all shapes
    python benchmarks/standard.py --target zen1 64 128     # only specs whose name has these
    python benchmarks/standard.py --target zen1 --set graphs   # the graph examples

``--set graphs`` benches the graphs of several ops (dense_relu, mlp, softmax, attention)
against the array peers (NumPy's sequence of the ops, JAX's jax.jit of the whole) and
writes their table, with our time, each peer's and the ratio to each, between the ``graphs``
markers.

For each spec file it first synthesizes into a fresh memo table (the cold synthesis time),
then runs ``python -m morello bench`` ``--runs`` times against that table. Each run checks
our code and every peer against NumPy, then times our code, the target's BLAS peers (NumPy's
OpenBLAS, and Intel MKL when installed; each called from a C loop, with the target's
settings) and the machine's FMA peak and read bandwidth, all in the same run. The median of
each figure over the runs is kept; the ratio is taken against the best peer of each run.
The table between the ``standard-set`` markers in BENCHMARKS.md is replaced; everything else
in the file is kept.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SET = [
    "matmul_64",
    "matmul_128",
    "matmul_256",
    "matmul_512",
    "matmul_1024",
    "matmul_8x512x512",
    "matmul_128x1024x64",
    "matmul_4x1024x1024",
    "matmul_32x2048x512",
    "matvec_1x2048x16384",
]
GRAPHS = ["dense_relu", "mlp", "softmax", "attention"]
BEGIN = "<!-- standard-set:begin -->"
END = "<!-- standard-set:end -->"
GRAPHS_BEGIN = "<!-- graphs:begin -->"
GRAPHS_END = "<!-- graphs:end -->"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("only", nargs="*", help="substrings selecting specs of the set")
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--runs", type=int, default=3, help="bench runs per spec (median kept)")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--set", choices=("standard", "graphs"), default="standard")
    args = ap.parse_args()
    chosen = GRAPHS if args.set == "graphs" else SET
    names = [n for n in chosen if not args.only or any(o in n for o in args.only)]
    rows: list[tuple[str, dict, list[dict]]] = []
    for name in names:
        spec = ROOT / "examples" / f"{name}.lark"
        db = Path(tempfile.mkdtemp(prefix="morello-std-")) / "memo.sqlite3"
        base = [sys.executable, "-m", "morello"]
        stats = json.loads(
            run(
                [
                    *base,
                    "--target",
                    args.target,
                    str(spec),
                    "--db",
                    str(db),
                    "--stats",
                    "--json",
                    "-o",
                    str(db.parent / name),
                ]
            )
        )
        benches = [
            json.loads(
                run([*base, "bench", "--target", args.target, str(spec), "--db", str(db), "--json"])
            )
            for _ in range(args.runs)
        ]
        shutil.rmtree(db.parent, ignore_errors=True)  # the cold table and the C, done with
        rows.append((name, stats, benches))
        print(f"{name}: {summary(benches)}", file=sys.stderr)
    if args.set == "graphs":
        lines = graph_table(rows, args.target, args.runs)
        replace_section(Path(args.out), GRAPHS_BEGIN, GRAPHS_END, lines, "Graphs")
        return 0
    peers = sorted({p for _, _, benches in rows for b in benches for p in b["peers"]})
    lines = [
        BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()} (single thread), target "
        f"{args.target}, with `python benchmarks/standard.py --target {args.target} --runs "
        f"{args.runs}`. Peers: the BLAS libraries the target names, each called from a C loop "
        f"on the same buffers, with the target's settings ({peer_settings(rows)}), in the same "
        "run as our code. GFLOP/s are medians of "
        f"{args.runs} bench runs of 7 batches each; the ratio is the best peer's time over ours "
        "in each run (above 1: Morello is faster), median over the runs. *% of limit* is our "
        "time against the bound that applies, measured in the same run: compute at the FMA "
        "peak of the target's vector width, or traffic at the read bandwidth.",
        "",
        "| spec | Morello GFLOP/s | "
        + " | ".join(f"{p} GFLOP/s" for p in peers)
        + " | best peer | ratio (median) | ratios of the runs | % of limit (bound) "
        "| cold synthesis (s) | Specs solved |",
        "|---|---|" + "---|" * len(peers) + "---|---|---|---|---|---|",
    ]
    for name, stats, benches in rows:
        peer_cells = [
            f"{statistics.median(b['peers'][p]['gflops'] for b in benches):.1f}"
            if all(p in b["peers"] for b in benches)
            else "-"
            for p in peers
        ]
        best = collections.Counter(b["best_peer"] for b in benches).most_common(1)[0][0]
        runs = ", ".join(f"{b['ratio']:.2f}" for b in benches)
        lines.append(
            f"| {name} | {median_of(benches, 'gflops'):.1f} | "
            + " | ".join(peer_cells)
            + f" | {best} | {median_of(benches, 'ratio'):.2f} | {runs} | "
            f"{median_of(benches, 'fraction_of_limit'):.0%} ({benches[0]['bound']}) | "
            f"{stats['seconds']:.1f} | {stats['specs_visited']} |"
        )
    lines.append(END)
    replace_section(Path(args.out), BEGIN, END, lines, "Standard set")
    return 0


def graph_table(rows: list[tuple[str, dict, list[dict]]], target: str, runs: int) -> list[str]:
    """The graphs' table: our time, each peer's, and the median ratio to each."""
    peers = sorted({p for _, _, benches in rows for b in benches for p in b["peers"]})
    lines = [
        GRAPHS_BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()} (single thread), target "
        f"{target}, with `python benchmarks/standard.py --target {target} --set graphs --runs "
        f"{runs}`. Times are medians per call (us) over {runs} bench runs; each ratio is the "
        "peer's time over ours in each run (above 1: Morello is faster), median over the runs. "
        f"Peers with the target's settings ({peer_settings(rows)}).",
        "",
        "| spec | Morello (us) | "
        + " | ".join(f"{p} (us) | ratio to {p}" for p in peers)
        + " | % of limit (bound) | cold synthesis (s) | Specs solved |",
        "|---|---|" + "---|---|" * len(peers) + "---|---|---|",
    ]
    for name, stats, benches in rows:
        cells = []
        for p in peers:
            if all(p in b["peers"] for b in benches):
                us = statistics.median(b["peers"][p]["seconds"] for b in benches) * 1e6
                ratio = statistics.median(b["ratios"][p] for b in benches)
                cells += [f"{us:.1f}", f"{ratio:.2f}"]
            else:
                cells += ["-", "-"]
        lines.append(
            f"| {name} | {median_of(benches, 'seconds') * 1e6:.1f} | "
            + " | ".join(cells)
            + f" | {median_of(benches, 'fraction_of_limit'):.0%} ({benches[0]['bound']}) | "
            f"{stats['seconds']:.1f} | {stats['specs_visited']} |"
        )
    lines.append(GRAPHS_END)
    return lines


def median_of(benches: list[dict], key: str) -> float:
    """The median of one figure over bench runs."""
    return statistics.median(b[key] for b in benches)


def peer_settings(rows: list[tuple[str, dict, list[dict]]]) -> str:
    """What the peers reported of themselves: one thread each, and their kernels."""
    said: dict[str, str] = {}
    for _, _, benches in rows:
        for p in benches[0]["peers"].values():
            d = p["detail"]
            what = d.get("core") or d.get("isa") or d.get("simd") or d.get("jax")
            if what and p["library"] not in said:
                said[p["library"]] = f"{p['library']}: {what}"
    return "; ".join(["one thread", *said.values()])


def summary(benches: list[dict]) -> str:
    """One line of medians for the progress log."""
    ratio = statistics.median(b["ratio"] for b in benches)
    frac = statistics.median(b["fraction_of_limit"] for b in benches)
    return (
        f"{statistics.median(b['gflops'] for b in benches):.1f} GFLOP/s, ratio {ratio:.2f} "
        f"against {benches[-1]['best_peer']}, {frac:.0%} of the {benches[-1]['bound']} limit"
    )


def replace_section(out: Path, begin: str, end: str, lines: list[str], heading: str) -> None:
    """Replace what lies between the ``begin`` and ``end`` markers of ``out`` with ``lines``
    (which start and end with the markers); a missing section is appended under ``heading``.
    Everything else in the file is kept.
    """
    text = out.read_text() if out.exists() else "# Benchmarks\n"
    if begin not in text:
        text += f"\n## {heading}\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    out.write_text(head + "\n".join(lines) + tail)


if __name__ == "__main__":
    sys.exit(main())
