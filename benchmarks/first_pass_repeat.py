"""How well `fidelity`'s first pass agrees with itself: the two ways of timing, twice each.

    MORELLO_CALIBRATION=off python benchmarks/first_pass_repeat.py examples/matmul_8x512x512.lark

For the spec's first function, `fidelity`'s list of programs (``cheapest_programs``, a fresh
in-memory memo) is timed twice in batches of all the programs taken in turn
(``time_impls_placed``, `fidelity --batches`) and twice each against the chosen program with
calls alternating (``time_paired``, `fidelity`'s default), in the order batches, paired,
batches, paired. Prints, for each way, Kendall's tau between its two runs (how well the
measurement agrees with itself) and the model's tau against each run, then every program's
predicted cost and its four times, each over the chosen program's in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from morello.codegen.bench import PLACEMENTS, median_placement
from morello.codegen.fidelity import (
    PAIRED_ROUNDS,
    cheapest_programs,
    time_impls_placed,
    time_paired,
)
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.plugins import Plugins


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("spec")
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=PAIRED_ROUNDS)
    args = ap.parse_args(argv)
    from scipy.stats import kendalltau

    ctx = make_context(args.target, Plugins(), [], 1)
    program = build_program(parse_spec_file(args.spec).funcs[0], ctx)
    impls = cheapest_programs(program, ctx, {}, args.top)
    costs = [i.cost for i in impls]
    runs: dict[str, list[list[float]]] = {"batches": [], "paired": []}
    for _ in range(2):
        for way in runs:
            start = time.perf_counter()
            if way == "batches":
                placed = time_impls_placed(program, impls, ctx, 5, 0.02, None, PLACEMENTS)
            else:
                placed = time_paired(program, impls, ctx, PLACEMENTS, args.rounds)
            secs = [median_placement(p).median for p in placed]
            runs[way].append([s / secs[0] for s in secs])
            tau = kendalltau(costs, secs).statistic
            print(f"{way}: {time.perf_counter() - start:.0f} s, model tau {tau:.2f}", flush=True)
    for way, (one, two) in runs.items():
        print(f"{way}: the two runs agree with tau {kendalltau(one, two).statistic:.2f}")
    print("rank  cost/chosen  batches (two runs)  paired (two runs)")
    for i, c in enumerate(costs):
        cells = "  ".join(f"{r[i]:.3f}" for way in runs.values() for r in way)
        print(f"{i:4d}  {c / costs[0]:11.3f}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
