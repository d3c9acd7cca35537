"""The standard benchmark set: bench every shape, rewrite the table in BENCHMARKS.md.

    python benchmarks/standard.py --target zen1            # all shapes
    python benchmarks/standard.py --target zen1 64 128     # only specs whose name has these

For each spec file it first synthesizes into a fresh memo table (the cold synthesis time),
then runs ``python -m morello bench`` ``--runs`` times against that table (each run checks
against NumPy before timing, and times Morello and NumPy in the same process run) and keeps
the median of each figure. The table between the ``standard-set`` markers in BENCHMARKS.md is
replaced; everything else in the file is kept.
"""

from __future__ import annotations

import argparse
import json
import platform
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
    "matvec_1x2048x16384",
]
BEGIN = "<!-- standard-set:begin -->"
END = "<!-- standard-set:end -->"


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
    args = ap.parse_args()
    names = [n for n in SET if not args.only or any(o in n for o in args.only)]
    rows = []
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
        med = {
            k: statistics.median(b[k] for b in benches) for k in ("gflops", "peer_gflops", "ratio")
        }
        rows.append((name, stats, med, [b["ratio"] for b in benches]))
        print(
            f"{name}: {med['gflops']:.1f} vs {med['peer_gflops']:.1f} GFLOP/s, "
            f"ratio {med['ratio']:.2f}, cold synthesis {stats['seconds']:.1f} s",
            file=sys.stderr,
        )
    lines = [
        BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model()} (single thread), target "
        f"{args.target}, with `python benchmarks/standard.py --target {args.target}`. Peer: NumPy "
        "matmul with the target's peer settings (OpenBLAS, one thread, AVX2 kernels), timed in "
        f"the same run. Figures are medians of {args.runs} bench runs of 7 batches each.",
        "",
        "| spec | Morello GFLOP/s | peer GFLOP/s | ratio (median) | ratios of the runs "
        "| cold synthesis (s) | Specs solved |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, stats, med, ratios in rows:
        runs = ", ".join(f"{r:.2f}" for r in ratios)
        lines.append(
            f"| {name} | {med['gflops']:.1f} | {med['peer_gflops']:.1f} | {med['ratio']:.2f} | "
            f"{runs} | {stats['seconds']:.1f} | {stats['specs_visited']} |"
        )
    lines.append(END)
    replace_section(Path(args.out), BEGIN, END, lines, "Standard set")
    return 0


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
