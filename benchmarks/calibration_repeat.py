"""How repeatable ``calibrate`` is: refit two or more of its reports every way and compare.

    python -m morello calibrate --target zen1 --dry-run --json > run1.json   # and run2, ...
    python benchmarks/calibration_repeat.py --target zen1 run1.json run2.json run3.json

Each report holds every program's feature row and its time in each round (``detail``), so
the fit can be made again offline, deterministically, with each way of reducing the rounds
to one time (``median`` of the rounds, ``fastest`` round, and, in reports that keep each
round's fastest batch, ``fastest batch``) and each weight of the pull toward the defaults
(``--rounds N``: each report's first N rounds only, to see what fewer rounds would give).
Only the programs every report timed are fitted (the refinement may add other programs to
each run). For every combination it prints, as a Markdown row:

* per pair of runs, how many fitted coefficients lie within 5% of each other (and the
  worst one's relative change), then the same after dividing the second run's by the
  factor they moved by together (the geometric mean of the ratios): a change of the
  machine's speed between the runs moves every coefficient alike;
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

#: Ways of reducing a program's timing to one time: (its detail's key, how).
REDUCE = {
    "median": ("rounds", statistics.median),
    "fastest": ("rounds", min),
    "fastest batch": ("round_lows", min),
}


def _time(d: dict[str, Any], how: str, rounds: int | None) -> float:
    """A program's time reduced ``how`` from its first ``rounds`` rounds (all: None)."""
    key, reduce = REDUCE[how]
    return reduce(d[key][:rounds])


def _fit(
    doc: dict[str, Any], rows: list[int], how: str, rounds: int | None, prior: float, base: Any
) -> Any:
    det = [doc["detail"][i] for i in rows]
    return calibration.fit(
        [d["features"] for d in det],
        [_time(d, how, rounds) for d in det],
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
    ap.add_argument(
        "--rounds", type=int, default=None, help="use only each report's first N rounds"
    )
    args = ap.parse_args()
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in args.reports]
    if len(docs) < 2 or any("rounds" not in d for doc in docs for d in doc["detail"]):
        print("need two or more reports whose detail has each round's time", file=sys.stderr)
        return 2
    names = docs[0]["names"]
    # The programs every report timed, in the first report's order.
    keyed = [{(d["function"], tuple(d["features"])): d for d in doc["detail"]} for doc in docs]
    keys = [k for k in keyed[0] if all(k in kd for kd in keyed[1:])]
    if not keys:
        print("the reports timed no program in common", file=sys.stderr)
        return 2
    docs = [{**doc, "detail": [kd[k] for k in keys]} for doc, kd in zip(docs, keyed, strict=True)]
    ways = [h for h in REDUCE if all(REDUCE[h][0] in d for doc in docs for d in doc["detail"])]
    print(f"{len(keys)} programs timed by every run (of {', '.join(str(len(kd)) for kd in keyed)})")
    base = make_context(args.target, Plugins(block=[CALIBRATION_PLUGIN]), [], None).coefficients
    everything = list(range(len(keys)))
    functions = list(dict.fromkeys(f for f, _ in keys))
    pairs = list(itertools.combinations(range(len(docs)), 2))
    head = [f"runs {i + 1}, {j + 1}" for i, j in pairs]
    head += [f"{h}, one scale removed" for h in head]
    print("| times | pull | " + " | ".join(head) + " | error in fit | held out: error | "
          "held out: tau |")  # fmt: skip
    print("|---" * (len(head) + 5) + "|")
    for how in ways:
        for prior in (float(p) for p in args.priors.split(",")):
            fits = [_fit(doc, everything, how, args.rounds, prior, base) for doc in docs]
            values = [[calibration.get_param(c, n) for n in names] for c, _ in fits]
            cells = []
            for scaled in (False, True):
                for i, j in pairs:
                    ratios = [b / a for a, b in zip(values[i], values[j], strict=True) if a and b]
                    scale = statistics.geometric_mean(ratios) if scaled and ratios else 1.0
                    pair = zip(values[i], (b / scale for b in values[j]), strict=True)
                    moved = [abs(a - b) / max(a, b, 1e-30) for a, b in pair]
                    cells.append(f"{sum(m <= 0.05 for m in moved)} ({max(moved):.0%})")
            err = [s["median_rel_error"] for _, s in fits]
            held_err, held_tau = [], []
            for i, j in itertools.permutations(range(len(docs)), 2):
                errs, taus = [], []
                for f in functions:
                    train = [k for k in everything if keys[k][0] != f]
                    test = [k for k in everything if keys[k][0] == f]
                    coeffs, _ = _fit(docs[i], train, how, args.rounds, prior, base)
                    pred = calibration.predict([keys[k][1] for k in test], names, coeffs)
                    got = [_time(docs[j]["detail"][k], how, args.rounds) for k in test]
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
