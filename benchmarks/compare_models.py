"""Two cost models ranking one pool of programs: which orders the measured times better.

``morello fidelity`` ranks each model's own cheapest programs, so two models are judged on
different lists and their Kendall's tau cannot be compared. This script builds one pool, the
``--top`` cheapest programs under each model (``cheapest_programs``, programs with the same C
counted once), times every program of it against the pool's first, calls of the two
alternating (``fidelity.time_paired``, as ``fidelity`` times its list; ``--batches``: all in
turn, as before), on ``--placements`` placements of its buffers, and reports for each model
how its costs order those times: Kendall's tau and Spearman's rho, the time of the program
it chooses, and how far that is from the fastest in the pool; and how well the placements'
times order the programs alike (``placement_tau``, the ceiling for either model's tau).

Model A is the target's coefficients as every command gets them (set
``MORELLO_CALIBRATION=off`` for the plugin's defaults); model B is model A with the fields of
OVERRIDES, a JSON object of ``CostCoefficients`` fields, replaced, for instance::

    MORELLO_CALIBRATION=off python benchmarks/compare_models.py \\
        examples/matmul_256.lark resources.json --top 30

with ``resources.json`` holding ``{"resources": {"fp": {"fma": 3}, "load": {"L1": 3}}}``.
Bad input (a spec that does not parse, an unknown field, a wrong value) is a one-line error
and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import attrs

from morello.calibration import tree_cost
from morello.codegen.bench import median_placement
from morello.codegen.c import lower_function
from morello.codegen.fidelity import (
    cheapest_programs,
    placement_agreement,
    rank_agreement,
    time_impls_placed,
    time_paired,
)
from morello.context import SynthesisContext, make_context
from morello.errors import MorelloError
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.target import CostCoefficients


def overridden(ctx: SynthesisContext, overrides: dict[str, Any]) -> SynthesisContext:
    """``ctx`` with the coefficient fields in ``overrides`` replaced.

    Raises:
        ValueError: a field ``CostCoefficients`` lacks, or a value it refuses.
    """
    known = {f.name for f in attrs.fields(CostCoefficients)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown coefficient field(s): {', '.join(unknown)}")
    try:
        coeffs = attrs.evolve(ctx.coefficients, **overrides)
    except (TypeError, AttributeError) as e:
        raise ValueError(f"bad coefficient value: {e}") from None
    return attrs.evolve(ctx, coefficients=coeffs)


def pool(program: Program, models: list[SynthesisContext], top: int) -> list[Impl]:
    """Each model's ``top`` cheapest programs, programs with the same C counted once."""
    found: dict[str, Impl] = {}
    for ctx in models:
        for impl in cheapest_programs(program, ctx, {}, top):
            found.setdefault(lower_function(impl, program, models[0])[0], impl)
    return list(found.values())


def judge(impls: list[Impl], seconds: list[float], ctx: SynthesisContext) -> dict[str, Any]:
    """How ``ctx``'s costs of ``impls`` order ``seconds``, its cheapest taken as its choice."""
    costs = [tree_cost(impl, ctx) for impl in impls]
    order = sorted(range(len(impls)), key=lambda i: costs[i])
    report = rank_agreement([costs[i] for i in order], [seconds[i] for i in order])
    report["chosen_us"] = seconds[order[0]] * 1e6
    report["fastest_us"] = min(seconds) * 1e6
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("spec", type=Path, help="spec file with one function")
    parser.add_argument("overrides", type=Path, help="JSON object of coefficient fields")
    parser.add_argument("--target", "-t", default="zen1")
    parser.add_argument("--top", type=int, default=30, help="programs per model (default 30)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds per program and placement (default 3)"
    )
    parser.add_argument(
        "--batches", action="store_true", help="time all the programs in turn, in batches"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="with --batches: timing rounds (default 5)"
    )
    parser.add_argument(
        "--placements",
        type=int,
        default=4,
        help="buffer placements each program is timed on, as bench and fidelity (default 4)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    args = parser.parse_args(argv)
    try:
        overrides = json.loads(args.overrides.read_text())
        if not isinstance(overrides, dict):
            raise ValueError("the overrides are not a JSON object")
        base = make_context(args.target)
        other = overridden(base, overrides)
        funcs = parse_spec_file(str(args.spec), args.spec.read_text(encoding="utf-8")).funcs
        if len(funcs) != 1:
            raise ValueError(f"{args.spec} has {len(funcs)} functions; give it one")
        program = build_program(funcs[0], base)
        impls = pool(program, [base, other], args.top)
        placed = (
            time_impls_placed(program, impls, base, args.repeats, placements=args.placements)
            if args.batches
            else time_paired(program, impls, base, args.placements, args.rounds)
        )
        seconds = [median_placement(p).median for p in placed]
        ceiling = placement_agreement([[t.median for t in p] for p in placed])
    except (OSError, ValueError, MorelloError) as e:
        print(f"compare_models: {e}", file=sys.stderr)
        return 2
    reports = {"A": judge(impls, seconds, base), "B": judge(impls, seconds, other)}
    if args.json:
        print(json.dumps({"programs": len(impls), "placement_tau": ceiling, **reports}, indent=2))
        return 0
    print(f"{len(impls)} programs")
    if ceiling is not None:
        print(f"the buffer placements order them alike with tau {ceiling:.3f}")
    for name, r in reports.items():
        print(
            f"model {name}: tau {r['kendall_tau']:.3f}, rho {r['spearman_rho']:.3f}, "
            f"chosen {r['chosen_us']:.1f} us, fastest {r['fastest_us']:.1f} us, "
            f"chosen / fastest {r['chosen_over_fastest']:.3f}, "
            f"fastest at rank {r['fastest_rank']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
