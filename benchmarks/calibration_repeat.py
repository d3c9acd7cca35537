"""How repeatable ``calibrate`` is: refit two or more of its reports every way and compare.

    python -m morello calibrate --target zen1 --dry-run --json > run1.json   # and run2, ...
    python benchmarks/calibration_repeat.py --target zen1 run1.json run2.json run3.json

Each report holds every program's feature row and its time in each round (``detail``), so
the fit can be made again offline, deterministically, with each way of reducing the rounds
to one time (``median`` of the rounds, ``fastest`` round) and each weight of the pull toward
the defaults. For every combination it prints, as a Markdown row:

* per pair of runs, how many fitted coefficients lie within 5% of each other (and the
  worst one's relative change);
* the median relative error of the fit to its own run;
* held out: fitted to one run without one function, that function's programs predicted
  against another run's times (median relative error; Kendall tau within the function,
  the mean over functions), for every ordered pair of runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from morello import calibration
from morello.codegen.fidelity import rank_agreement
from morello.context import make_context
from morello.plugins import CALIBRATION_PLUGIN, Plugins

REDUCE = {"median": statistics.median, "fastest": min}


def _fit(doc: dict[str, Any], rows: list[int], how: str, prior: float, base: Any) -> Any:
    det = [doc["detail"][i] for i in rows]
    return calibration.fit(
        [d["features"] for d in det],
        [REDUCE[how](d["rounds"]) for d in det],
        doc["names"],
        base,
        prior=prior,
        groups=[d["function"] for d in det],
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--priors", default="0.3,0.6,1.0", help="pull weights to try")
    ap.add_argument("reports", nargs="+", type=Path, help="calibrate --json reports (2 or more)")
    args = ap.parse_args()
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in args.reports]
    if len(docs) < 2 or any("rounds" not in d for doc in docs for d in doc["detail"]):
        print("need two or more reports whose detail has each round's time", file=sys.stderr)
        return 2
    names = docs[0]["names"]
    keys = [(d["function"], d["features"]) for d in docs[0]["detail"]]
    if any([(d["function"], d["features"]) for d in doc["detail"]] != keys for doc in docs):
        print("the reports timed different programs", file=sys.stderr)
        return 2
    base = make_context(args.target, Plugins(block=[CALIBRATION_PLUGIN]), [], None).coefficients
    everything = list(range(len(keys)))
    functions = list(dict.fromkeys(f for f, _ in keys))
    pairs = list(itertools.combinations(range(len(docs)), 2))
    head = [f"runs {i + 1}, {j + 1}" for i, j in pairs]
    print("| times | pull | " + " | ".join(head) + " | error in fit | held out: error | "
          "held out: tau |")  # fmt: skip
    print("|---" * (len(head) + 5) + "|")
    for how in REDUCE:
        for prior in (float(p) for p in args.priors.split(",")):
            fits = [_fit(doc, everything, how, prior, base) for doc in docs]
            values = [[calibration.get_param(c, n) for n in names] for c, _ in fits]
            cells = []
            for i, j in pairs:
                pair = zip(values[i], values[j], strict=True)
                moved = [abs(a - b) / max(a, b, 1e-30) for a, b in pair]
                cells.append(f"{sum(m <= 0.05 for m in moved)} ({max(moved):.0%})")
            err = [s["median_rel_error"] for _, s in fits]
            held_err, held_tau = [], []
            for i, j in itertools.permutations(range(len(docs)), 2):
                errs, taus = [], []
                for f in functions:
                    train = [k for k in everything if keys[k][0] != f]
                    test = [k for k in everything if keys[k][0] == f]
                    coeffs, _ = _fit(docs[i], train, how, prior, base)
                    pred = calibration.predict([keys[k][1] for k in test], names, coeffs)
                    got = [REDUCE[how](docs[j]["detail"][k]["rounds"]) for k in test]
                    errs += [abs(p * 1e-12 - t) / t for p, t in zip(pred, got, strict=True)]
                    taus.append(rank_agreement(pred, got)["kendall_tau"] or 0.0)
                held_err.append(statistics.median(errs))
                held_tau.append(statistics.fmean(taus))
            print(
                f"| {how} | {prior} | " + " | ".join(cells)
                + f" | {min(err):.1%}-{max(err):.1%} | {min(held_err):.1%}-{max(held_err):.1%}"
                f" | {min(held_tau):.2f}-{max(held_tau):.2f} |"
            )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
