"""How well could any coefficients rank a fidelity report's programs? The model's form judged.

    MORELLO_CALIBRATION=off python benchmarks/tau_ceiling.py \\
        docs/fidelity-zen1-zen4-stop74-paired.json [names] [--pair-weight W]

The report's programs are built again as ``rerank.py`` builds them (their trees replayed
under the model in use, if the report holds them; else made again by the search, under the
model and coefficients the report was made with: their costs are checked). For each program its
features are taken (``calibration.features`` over ``calibration.parameters``: what it pays per
unit of each coefficient, such as its lines at each level and its operations of each kind),
and coefficients are fitted to the report's own measured times by ``calibrate``'s fit
(``calibration.fit``: non-negative least squares on relative errors, with pairs of one spec's
programs as rows too, weighted by ``--pair-weight``). Printed, one line each: Kendall's tau of
every spec under the coefficients in use; under coefficients fitted to all the report's times
(in sample: about the best this model's form can rank these very lists, though the fit
minimizes errors, not rank); and under coefficients fitted to the other specs' times with each
spec left out in turn (out of sample: what a calibration on other programs can give). Then the
in-sample fit's coefficients.

A model feature that the in-sample line does not lift cannot help, whatever the coefficients;
one that lifts it is worth pricing (``rerank.py`` judges given coefficients instead).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rerank import load_lists, read_report, report_parser  # noqa: E402

from morello.calibration import features, fit, get_param, parameters, tree_cost  # noqa: E402
from morello.context import make_context  # noqa: E402
from morello.errors import MorelloError  # noqa: E402

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Impl
    from morello.target import CostCoefficients


def taus(
    lists: Sequence[tuple[str, list[Impl], list[float]]], ctx: SynthesisContext
) -> list[float]:
    """Kendall's tau of each list's costs under ``ctx`` against its measured times."""
    from scipy.stats import kendalltau

    return [
        float(kendalltau([tree_cost(i, ctx) for i in impls], secs).statistic)
        for _, impls, secs in lists
    ]


def fitted(
    rows: Sequence[Sequence[Sequence[float]]],
    lists: Sequence[tuple[str, list[Impl], list[float]]],
    names: Sequence[str],
    base: CostCoefficients,
    pair_weight: float,
) -> CostCoefficients:
    """Coefficients fitted to the times of ``lists`` (``rows``: their features, list by list)."""
    flat = [r for rs in rows for r in rs]
    secs = [s for _, _, ss in lists for s in ss]
    groups = [name for name, impls, _ in lists for _ in impls]
    coeffs, _ = fit(flat, secs, names, base, groups=groups, pair_weight=pair_weight)
    return coeffs


def main(argv: Sequence[str] | None = None) -> int:
    ap = report_parser(__doc__)
    ap.add_argument(
        "--pair-weight", type=float, default=1.0, help="weight of the pairs' rows (0: none)"
    )
    args = ap.parse_intermixed_args(argv)
    try:
        loaded = read_report(args.report)
        base = make_context(args.target)
        lists = load_lists(loaded if isinstance(loaded, list) else [loaded], base, args.only)
    except (OSError, ValueError, KeyError, StopIteration, MorelloError) as e:
        print(f"tau_ceiling: {e!r}" if not str(e) else f"tau_ceiling: {e}", file=sys.stderr)
        return 2
    names = parameters(base.coefficients)
    rows = [[features(i, base, names) for i in impls] for _, impls, _ in lists]

    def line(label: str, ts: Sequence[float]) -> None:
        cells = " | ".join(f"{t:.2f}" for t in ts)
        print(f"{label} | {statistics.mean(ts):.3f} | {cells}", flush=True)

    print("coefficients | mean tau | " + " | ".join(name for name, _, _ in lists))
    line("in use", taus(lists, base))
    every = fitted(rows, lists, names, base.coefficients, args.pair_weight)
    line("fitted to all (in sample)", taus(lists, attrs.evolve(base, coefficients=every)))
    if len(lists) > 1:
        out = []
        for k in range(len(lists)):
            others = [x for j, x in enumerate(lists) if j != k]
            rest = [x for j, x in enumerate(rows) if j != k]
            co = fitted(rest, others, names, base.coefficients, args.pair_weight)
            out += taus(lists[k : k + 1], attrs.evolve(base, coefficients=co))
        line("fitted to the others (left out)", out)
    print("in-sample fit: " + ", ".join(f"{n} {get_param(every, n):g}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
