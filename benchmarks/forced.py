"""A program whose first decisions are forced, the rest chosen by the search: what the cost
model says of it against the program it chooses, and its C to time against that program.

Each DECISION is the start of an action's one-line description as ``--impl`` prints it (the
text before the first ``|``), for instance ``tile_out: for m in 4 x 256``. The first applies
to the function's Spec; each next one to a child of the node the previous one made, its
first child unless the decision starts with ``N@`` (``1@move: operand 1`` follows child 1,
a move's body where child 0 is its copy). Children not followed, and everything below the
last decision, are solved by the search. A forced action (residency in a cache the hardware
fills, the only action offered where it applies) is taken on the way when a decision does
not name it. BENCHMARKS.md's notes on 1024^3 and dense_relu
used it with ``benchmarks/ab.py``:

    python benchmarks/forced.py --target zen1 examples/matmul_1024.lark -o forced.c \\
        "tile_out: for m in 4 x 256" "split_init: for k in 4 x 256"
    python -m morello --target zen1 examples/matmul_1024.lark -o chosen.c
    python benchmarks/ab.py examples/matmul_1024.lark chosen.c forced.c --runs 3

Prints the forced and the chosen program's predicted costs and their ratio (``--impl``: the
forced tree too); exits 2, listing what was offered, when a decision matches no action, and
with a one-line error when a Spec the decisions lead to has no implementation under its
memory limits.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from morello.cli import format_impl
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.errors import MorelloError
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.expand import only_forced, spec_actions, under_forced
from morello.search.solve import synthesize
from morello.spec import Spec


class NoSuchDecision(Exception):
    """A forced decision matches none of the actions offered at its Spec."""


def forced_impl(
    spec: Spec, decisions: Sequence[str], ctx: SynthesisContext, memo: dict[Spec, object]
) -> Impl:
    """``spec`` implemented by the first action whose description starts with
    ``decisions[0]``, the followed child by the rest of ``decisions``, everything else by
    the search (sharing ``memo``). A forced action that ``decisions[0]`` does not name is
    taken, and the decisions apply to its child.

    Raises:
        NoSuchDecision: a decision matches no action offered where it applies.
    """
    if not decisions:
        return synthesize(spec, ctx, memo)[0]
    text = _child_and_text(decisions[0])[1]
    follow = _child_and_text(decisions[1])[0] if len(decisions) > 1 else 0
    offered = spec_actions(spec, ctx)
    chosen = next((a for a in offered if a.describe().startswith(text)), None)
    if chosen is None and only_forced(spec, ctx) is not None:
        # Residency: no choice to name, so the decisions apply below it.
        return under_forced(spec, ctx, lambda below: forced_impl(below, decisions, ctx, memo))
    if chosen is None:
        lines = "\n".join(f"  {a.describe()}" for a in offered)
        raise NoSuchDecision(
            f"no action at {spec.describe()} starts with {text!r}; offered:\n{lines}"
        )
    if follow >= len(chosen.children):
        raise NoSuchDecision(f"{chosen.describe()} has no child {follow}")
    children = tuple(
        forced_impl(child, decisions[1:] if i == follow else (), ctx, memo)
        for i, child in enumerate(chosen.children)
    )
    cost = chosen.cost(spec, [c.cost for c in children], ctx)
    peaks = chosen.peaks(spec, [c.peaks for c in children], ctx)
    return Impl(spec, chosen, children, cost, peaks)


def _child_and_text(decision: str) -> tuple[int, str]:
    """``N@text`` as ``(N, text)``; a decision without ``N@`` applies to child 0."""
    head, sep, rest = decision.partition("@")
    if sep and head.isdigit():
        return int(head), rest
    return 0, decision


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("spec", help="spec file with one function")
    p.add_argument("decisions", nargs="+", metavar="DECISION")
    p.add_argument("--target", "-t", default="zen1")
    p.add_argument("-o", "--output", type=Path, help="write the forced program's C here")
    p.add_argument("--impl", action="store_true", help="print the forced Impl tree")
    args = p.parse_args(argv)
    try:
        ctx = make_context(args.target)
        (func,) = parse_spec_file(args.spec, Path(args.spec).read_text(encoding="utf-8")).funcs
        program = build_program(func, ctx)
        memo: dict[Spec, object] = {}
        impl = forced_impl(program.spec, args.decisions, ctx, memo)
        chosen, _ = synthesize(program.spec, ctx, memo)
    except NoSuchDecision as exc:
        print(f"forced.py: error: {exc}", file=sys.stderr)
        return 2
    except MorelloError as exc:  # a bad spec, or a forced Spec no implementation fits
        print(f"forced.py: error: {exc.message}", file=sys.stderr)
        return 2
    ratio = impl.cost / chosen.cost
    print(f"forced cost {impl.cost}, chosen cost {chosen.cost}, forced / chosen {ratio:.4f}")
    if args.impl:
        print(format_impl(impl, ctx))
    if args.output is not None:
        args.output.write_text(
            lower_to_c(func.name, [(program, impl)], ctx).c_text, encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
