"""Other coefficients judged on programs already timed: a fidelity report ranked again.

    MORELLO_CALIBRATION=off python benchmarks/rerank.py \\
        docs/fidelity-zen1-zen4-stop74-paired.json [--overrides B.json ...] [--grid] [names]

For each spec of the report (``morello fidelity --json`` or ``benchmarks/fidelity.py``'s
list), the same list of programs is built again, and each program's cost is computed under
other coefficients (``calibration.tree_cost``), so their Kendall's tau against the report's
measured times comes without timing anything again. A report made with ``--trees`` holds each
program's Impl tree, which is replayed under the model and coefficients in use, whatever
made the report: so a change to the model itself is judged on times measured before it.
Without the trees the list is made again by the search (``fidelity.cheapest_programs``),
which needs the model and coefficients the report was made with (its costs are checked).
Each ``--overrides`` file is a JSON object of ``CostCoefficients`` fields, as for
``compare_models.py``; ``--grid`` adds every nonzero named coefficient, level price, chain
latency, stream price and restart price halved and doubled, one at a time. Prints one line
per model: the mean tau over the specs, then each spec's.

Only the order of the report's programs is judged: which program the other coefficients
would choose, and how fast it is, needs ``compare_models.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from compare_models import overridden  # noqa: E402

from morello.calibration import tree_cost  # noqa: E402
from morello.codegen.fidelity import cheapest_programs  # noqa: E402
from morello.context import make_context  # noqa: E402
from morello.errors import MorelloError  # noqa: E402
from morello.impl import Impl  # noqa: E402
from morello.lang.spec_file import build_program, parse_spec_file  # noqa: E402
from morello.search.expand import only_forced, spec_actions, under_forced  # noqa: E402
from morello.target import CostCoefficients  # noqa: E402

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.lang.spec_file import Program
    from morello.spec import Spec


def grid(co: CostCoefficients) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each nonzero coefficient halved and doubled, one at a time."""
    for f in (0.5, 2.0):
        for k, v in co.named.items():
            if v:
                yield f"{k} x{f}", {"named": {**co.named, k: round(v * f)}}
        for k, v in co.level_hit.items():
            if v:
                yield f"level_hit.{k} x{f}", {"level_hit": {**co.level_hit, k: round(v * f)}}
        for k, v in co.chain_latency.items():
            if v:
                chain = {**co.chain_latency, k: round(v * f)}
                yield f"chain_latency.{k} x{f}", {"chain_latency": chain}
        for k, v in co.stream_hit.items():
            yield (
                f"stream_hit.{k} x{f}",
                {"stream_hit": {**co.stream_hit, k: tuple(round(x * f) for x in v)}},
            )
        for k, v in co.stream_restart.items():
            if v:
                restart = {**co.stream_restart, k: round(v * f)}
                yield f"stream_restart.{k} x{f}", {"stream_restart": restart}


def read_report(path: Path) -> Any:
    """A fidelity report's JSON, gzipped if its name ends in ``.gz`` (reports with trees)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    return json.loads(path.read_text(encoding="utf-8"))


def report_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments of a script that reads a fidelity report: the report, names, target."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("report", type=Path, help="fidelity's JSON (or .json.gz): one report or a list")
    ap.add_argument("only", nargs="*", help="substrings selecting specs of the report")
    ap.add_argument("--target", default="zen1")
    return ap


def replay(text: str, spec: Spec, ctx: SynthesisContext) -> Impl:
    """The Impl tree that ``text`` (``format_impl``'s lines, as ``fidelity --trees`` stores
    them) describes for ``spec``, its costs and peaks computed under ``ctx``: at each Spec, the
    offered action whose description is the line's, its children the lines indented below.
    Where a Spec's only action is a residency in a cache that holds whole Specs and the line
    names another, the residency is taken and the line applies to the Spec below it: so trees
    timed under a target are judged under the same target with such a cache added (a
    ``whole_specs`` L2 in a plugin copy on ``PYTHONPATH``) without timing them again.

    Raises:
        ValueError: a line names no action offered there, or its children do not match.
    """
    nodes: list[tuple[str, list[Any]]] = []  # (description, children) per line, nested
    stack: list[tuple[int, list[Any]]] = [(-1, nodes)]
    for line in text.splitlines():
        depth = (len(line) - len(line.lstrip(" "))) // 2
        node: tuple[str, list[Any]] = (line.strip().split("  | ")[0], [])
        while stack[-1][0] >= depth:
            stack.pop()
        stack[-1][1].append(node)
        stack.append((depth, node[1]))
    if len(nodes) != 1:
        raise ValueError(f"a tree has one root, not {len(nodes)}")

    def build(spec: Spec, node: tuple[str, list[Any]]) -> Impl:
        text, kids = node
        action = next((a for a in spec_actions(spec, ctx) if a.describe() == text), None)
        if action is None and only_forced(spec, ctx) is not None:
            # A tree made under a target without this cache: the residency is the Spec's only
            # action, and the tree's line applies to the resident Spec below it.
            return under_forced(spec, ctx, lambda below: build(below, node))
        if action is None:
            raise ValueError(f"no action at {spec.describe()} is {text!r}")
        if len(action.children) != len(kids):
            raise ValueError(f"{text!r} has {len(action.children)} children, the tree {len(kids)}")
        children = tuple(build(c, k) for c, k in zip(action.children, kids, strict=True))
        cost = action.cost(spec, [c.cost for c in children], ctx)
        peaks = action.peaks(spec, [c.peaks for c in children], ctx)
        return Impl(spec, action, children, cost, peaks)

    return build(spec, nodes[0])


def report_program(report: dict[str, Any], ctx: SynthesisContext) -> Program:
    """The checked function a report's programs implement: its spec file in examples/ (by the
    report's name), else the path the report gives.

    Raises:
        OSError, KeyError, StopIteration: the spec file is gone, or lacks the function.
    """
    name = report.get("name") or report["function"]
    path = ROOT / "examples" / f"{name}.lark"
    if not path.exists():
        path = Path(report["spec"].rsplit(":", 1)[0])
    funcs = parse_spec_file(str(path), path.read_text(encoding="utf-8")).funcs
    func = next(f for f in funcs if f.name == report["function"])
    return build_program(func, ctx)


def load_lists(
    reports: Sequence[dict[str, Any]], base: SynthesisContext, only: Sequence[str] = ()
) -> list[tuple[str, list[Impl], list[float]]]:
    """Each report's programs built again under ``base``, with their measured times:
    ``(name, impls, seconds)`` for the reports whose name contains one of ``only`` (all when
    empty). A report whose programs carry their trees (``fidelity --trees``) has them replayed
    (``replay``), costed by ``base``'s model and coefficients whatever made the report; one
    without is made again (``fidelity.cheapest_programs``), which gives the same programs only
    under the model and coefficients that made it, so their costs are checked.

    Raises:
        ValueError: the programs made again cost otherwise than the report says (another
            model or other coefficients made it), or a tree does not replay.
        OSError, KeyError, StopIteration: the spec file is gone, or lacks the function.
    """
    lists = []
    for r in reports:
        name = r.get("name") or r["function"]
        if only and not any(s in name for s in only):
            continue
        program = report_program(r, base)
        if all("impl" in p for p in r["programs"]):
            try:
                impls = [replay(p["impl"], program.spec, base) for p in r["programs"]]
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        else:
            impls = cheapest_programs(program, base, {}, len(r["programs"]), r["spacing"])
            if [i.cost for i in impls] != [p["cost"] for p in r["programs"]]:
                raise ValueError(
                    f"{name}: the programs built again cost otherwise than the report's; "
                    "run under the model and coefficients it was made with "
                    "(MORELLO_CALIBRATION=off for a target's defaults)"
                )
        lists.append((name, impls, [p["seconds"] for p in r["programs"]]))
    return lists


def main(argv: Sequence[str] | None = None) -> int:
    from scipy.stats import kendalltau

    ap = report_parser(__doc__)
    ap.add_argument("--overrides", type=Path, action="append", default=[], metavar="FILE")
    ap.add_argument("--grid", action="store_true", help="each coefficient halved and doubled")
    args = ap.parse_intermixed_args(argv)
    try:
        loaded = read_report(args.report)
        reports = loaded if isinstance(loaded, list) else [loaded]
        base = make_context(args.target)
        models = [("in use", base)]
        for path in args.overrides:
            models.append((path.stem, overridden(base, json.loads(path.read_text()))))
        if args.grid:
            models += [(name, overridden(base, ov)) for name, ov in grid(base.coefficients)]
        lists = load_lists(reports, base, args.only)
    except (OSError, ValueError, KeyError, StopIteration, MorelloError) as e:
        print(f"rerank: {e!r}" if not str(e) else f"rerank: {e}", file=sys.stderr)
        return 2
    print("model | mean tau | " + " | ".join(name for name, _, _ in lists))
    for label, ctx in models:
        taus = [
            float(kendalltau([tree_cost(i, ctx) for i in impls], secs).statistic)
            for _, impls, secs in lists
        ]
        cells = " | ".join(f"{t:.2f}" for t in taus)
        print(f"{label} | {statistics.mean(taus):.3f} | {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
