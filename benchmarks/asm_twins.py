"""Programs of a fidelity report that compile to the same instructions, and what the model
and the clock made of them.

    MORELLO_CALIBRATION=off python benchmarks/asm_twins.py \\
        docs/fidelity-zen1-zen4-stop75-trees.json.gz [names] [--show N]

Each program of each list (a report made with ``fidelity --trees``; the trees are replayed
under the model in use, ``rerank.replay``) is written as C and compiled to assembly with the
target's compiler and flags; the assembly, less its labels and assembler directives, groups
the programs. Programs of one group run the same instructions, so a model that prices them
apart prices something the machine does not see (stop 75 found one such: 8x512x512's scalar
load of A against its broadcast from L1, now ``LoopAction.loaded_once``), and their measured
times differ only by noise and placement, which bounds how finely a list can be ranked.
Prints, per spec, the number of programs and of distinct assemblies, the groups whose costs
differ (the cost ratio, highest over lowest), and the largest time ratio within a group;
``--show N`` prints the first N groups priced apart with their trees.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from rerank import read_report, replay, report_parser, report_program  # noqa: E402

from morello.calibration import tree_cost  # noqa: E402
from morello.cli import format_impl  # noqa: E402
from morello.codegen.compile import needs_openmp  # noqa: E402
from morello.codegen.header import lower_to_c  # noqa: E402
from morello.context import make_context  # noqa: E402
from morello.errors import MorelloError  # noqa: E402
from morello.target import Target  # noqa: E402

_NOISE = re.compile(r"^\s*(\.|[.\w$]+:)")  # directives and labels
_LABEL = re.compile(r"\.L\w+")


def assembly_key(c_text: str, target: Target, folder: Path) -> str:
    """A digest of the instructions ``c_text`` compiles to (labels and directives left out)."""
    src, asm = folder / "p.c", folder / "p.s"
    src.write_text(c_text, encoding="utf-8")
    flags = list(target.compiler.flags)
    if needs_openmp(c_text):
        flags += target.compiler.openmp_flags
    subprocess.run([target.compiler.cc, *flags, "-S", "-o", str(asm), str(src)], check=True)
    lines = [
        _LABEL.sub("L", line.strip())
        for line in asm.read_text(encoding="utf-8").splitlines()
        if line.strip() and not _NOISE.match(line)
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def spread(values: Sequence[float]) -> float:
    """The largest of ``values`` over the smallest."""
    return max(values) / min(values)


def main(argv: Sequence[str] | None = None) -> int:
    ap = report_parser(__doc__)
    ap.add_argument("--show", type=int, default=0, metavar="N", help="trees of N groups")
    args = ap.parse_intermixed_args(argv)
    try:
        loaded = read_report(args.report)
        reports = loaded if isinstance(loaded, list) else [loaded]
        ctx = make_context(args.target)
    except (OSError, ValueError, MorelloError) as e:
        print(f"asm_twins: {e}", file=sys.stderr)
        return 2
    shown = 0
    print("spec | programs | assemblies | groups priced apart | cost ratio | time ratio")
    with tempfile.TemporaryDirectory(prefix="asm-twins-") as tmp:
        for r in reports:
            name = r.get("name") or r["function"]
            if args.only and not any(s in name for s in args.only):
                continue
            if not all("impl" in p for p in r["programs"]):
                print(f"asm_twins: {name} has no trees (fidelity --trees)", file=sys.stderr)
                return 2
            program = report_program(r, ctx)
            groups: dict[str, list[tuple[int, int, float, str]]] = defaultdict(list)
            for rank, p in enumerate(r["programs"]):
                impl = replay(p["impl"], program.spec, ctx)
                c_text = lower_to_c("f", [(program, impl)], ctx).c_text
                key = assembly_key(c_text, ctx.target, Path(tmp))
                tree = format_impl(impl, ctx)
                groups[key].append((rank, tree_cost(impl, ctx), p["seconds"], tree))
            apart = [g for g in groups.values() if len({c for _, c, _, _ in g}) > 1]
            cost_ratio = max((spread([c for _, c, _, _ in g]) for g in apart), default=1.0)
            time_ratio = max(spread([s for _, _, s, _ in g]) for g in groups.values())
            print(
                f"{name} | {len(r['programs'])} | {len(groups)} | {len(apart)} | "
                f"{cost_ratio:.3f} | {time_ratio:.3f}",
                flush=True,
            )
            for g in apart:
                if shown >= args.show:
                    break
                shown += 1
                print(f"\n{name}: ranks {[rank for rank, _, _, _ in g]} compile alike")
                for rank, cost, secs, tree in g:
                    print(f"-- rank {rank}: cost {cost}, {secs * 1e6:.1f} us\n{tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
