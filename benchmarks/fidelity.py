"""Fidelity of the cost model on the standard set: ``morello fidelity`` for every spec.

    python benchmarks/fidelity.py --target zen1 --label before   # the target's defaults
    python benchmarks/fidelity.py --target zen1 --label after    # this machine's calibration
    python benchmarks/fidelity.py --target zen1 --label x 64 128 # only specs with these names

``--label before`` runs with MORELLO_CALIBRATION=off (the plugin's coefficients), any other
label with whatever coefficients are in use. Each spec of the standard set
(``benchmarks/standard.py``) runs ``python -m morello fidelity --json --top N`` in a fresh
memo table; the reports go to ``docs/fidelity-<target>-<label>.json`` (``.json.gz`` with
``--trees``, which keeps each program's Impl tree for ``rerank.py``), one plot per spec
panel to ``docs/fidelity-<target>-<label>.png``, and a table to stdout (Markdown, for
BENCHMARKS.md). Its last column is the rematch's verdict (``morello fidelity --rematch``):
the programs measured faster than the chosen one, timed again against it alone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from standard import SET  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("only", nargs="*", help="substrings selecting specs of the set")
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--label", required=True, help="'before' for the defaults; any other name")
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="fidelity's --rounds")
    ap.add_argument(
        "--batches", action="store_true", help="fidelity's --batches: the first pass as before"
    )
    ap.add_argument("--repeats", type=int, default=5, help="with --batches: fidelity's --repeats")
    ap.add_argument(
        "--trees",
        action="store_true",
        help="fidelity's --trees: the reports hold each program's Impl tree, which rerank.py "
        "and tau_ceiling.py replay under a changed model (about ten times the JSON)",
    )
    args = ap.parse_args()
    env = dict(os.environ)
    if args.label == "before":
        env["MORELLO_CALIBRATION"] = "off"
    names = [n for n in SET if not args.only or any(s in n for s in args.only)]
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            cmd = [
                sys.executable, "-m", "morello", "fidelity", "--target", args.target, "--json",
                "--top", str(args.top), "--rounds", str(args.rounds),
                *(["--batches", "--repeats", str(args.repeats)] if args.batches else []),
                *(["--trees"] if args.trees else []),
                "--db", str(Path(tmp) / "memo.sqlite3"), str(ROOT / "examples" / f"{name}.lark"),
            ]  # fmt: skip
            print(f"{name} ...", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                return 1
            rep = json.loads(proc.stdout)
            rep["name"] = name
            reports.append(rep)
    stem = ROOT / "docs" / f"fidelity-{args.target}-{args.label}"
    text = json.dumps(reports, indent=1) + "\n"
    if args.trees:  # about ten times the JSON: gzipped (rerank.py and tau_ceiling.py read it)
        with gzip.open(stem.with_suffix(".json.gz"), "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        stem.with_suffix(".json").write_text(text)
    try:
        from morello.codegen.fidelity import plot

        plot(reports, stem.with_suffix(".png"), f"fidelity on {args.target}, {args.label}")
    except Exception as exc:
        print(f"no plot: {exc}", file=sys.stderr)
    print(f"| spec ({args.label}) | programs | Kendall tau | tau between placements "
          "| Spearman rho | fastest at rank | chosen / fastest | after the rematch |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")

    def two(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    def again(r: dict) -> str:
        """The rematch's verdict: the chosen time over the fastest's, and that one's rank."""
        m = r.get("rematch")
        if m is None:
            return "1.000 (rank 0)"
        return f"{m['chosen_over_fastest']:.3f} (rank {m['fastest_rank']})"

    for r in reports:
        print(
            f"| {r['name']} | {len(r['programs'])} | {two(r['kendall_tau'])} "
            f"| {two(r.get('placement_tau'))} | {two(r['spearman_rho'])} "
            f"| {r['fastest_rank']} | {r['chosen_over_fastest']:.3f} | {again(r)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
