"""``split_fuse`` forced on random graphs, each compiled and checked against NumPy.

    python benchmarks/split_fuse_sweep.py --count 40 --seed 12 [--target zen1]

The fuzzer (``benchmarks/fuzz.py``) draws extents up to a few dozen, below the reductions
``split_fuse`` applies to (from 128), so this draws graphs for it: a first statement that
reduces over k from 128 to 200 (a product, a product with a vector on either side, a row
sum or a row maximum), then one or two of ``relu``, ``add``, ``sub``, ``mul`` and ``max``
with a vector or a full operand, inputs row- or column-major, a fifth of the matrix
products in bf16. Where the rule set offers ``split_fuse`` at the root, one of its actions
(drawn) is taken, the rest synthesized (``benchmarks/forced.py``), and the program compiled
and compared with NumPy as ``--check`` does. Graphs not offered it (a single op; a graph
that already adds a full-shape input to its first result, the form of a split's second
stage, which is split once) are counted apart. Prints one line per case and a summary;
exits 1 if any case was wrong or failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import SplitFuseAction
from morello.search.expand import past_forced, spec_actions

# benchmarks/forced.py: a tree with one action taken where it applies, the rest searched.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from forced import forced_impl

OPS_AFTER = ("relu", "add", "sub", "mul", "max")


def random_graph(rng: random.Random) -> str:
    """A spec function whose first statement reduces over k in 128..200."""

    def layout() -> str:
        return rng.choice(["", "", " col_major"])

    m, n, k = rng.randint(1, 9), rng.randint(1, 17), rng.randint(128, 200)
    form = rng.choice(
        ["matmul", "matmul", "matmul", "vector_matrix", "matrix_vector", "sum", "max"]
    )
    dtype = "bf16" if form == "matmul" and rng.random() < 0.2 else "f32"
    if form == "matmul":
        params = [f"x: {dtype}[{m}, {k}]{layout()}", f"w: {dtype}[{k}, {n}]{layout()}"]
        expr, shape = "matmul(x, w)", (m, n)
    elif form == "vector_matrix":
        params = [f"x: f32[{k}]", f"w: f32[{k}, {n}]{layout()}"]
        expr, shape = "matmul(x, w)", (n,)
    elif form == "matrix_vector":
        params = [f"x: f32[{m}, {k}]{layout()}", f"w: f32[{k}]"]
        expr, shape = "matmul(x, w)", (m,)
    else:
        params = [f"x: f32[{m}, {k}]{layout()}"]
        expr, shape = f"{form}(x)", (m,)
    for j in range(rng.randint(1, 2)):
        op = rng.choice(OPS_AFTER)
        if op == "relu":
            expr = f"relu({expr})"
            continue
        if len(shape) == 2 and rng.random() < 0.5:
            params.append(f"b{j}: f32[{shape[1]}]")  # a trailing vector, broadcast
        else:
            dims = ", ".join(map(str, shape))
            params.append(f"b{j}: f32[{dims}]{layout() if len(shape) == 2 else ''}")
        expr = f"{op}({expr}, b{j})"
    out = ", ".join(map(str, shape))
    return f"func f({', '.join(params)}) -> y: f32[{out}] {{\n    y = {expr}\n}}\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--count", type=int, default=40, help="graphs to draw (default 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--target", "-t", default="zen1", help="target (default zen1)")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    ctx = make_context(args.target)
    passed = not_offered = failed = 0
    for i in range(args.count):
        text = random_graph(rng)
        statement = text.splitlines()[1].strip()
        start = time.perf_counter()
        try:
            (func,) = parse_spec_file(f"<case {i}>", text).funcs
            program = build_program(func, ctx)
            spec = past_forced(program.spec, ctx)
            actions = [a for a in spec_actions(spec, ctx) if isinstance(a, SplitFuseAction)]
            if not actions:
                not_offered += 1
                print(f"{i}: not offered: {statement}", flush=True)
                continue
            action = rng.choice(actions)
            impl = forced_impl(program.spec, [action.describe()], ctx, {})
            source = lower_to_c("f", [(program, impl)], ctx)
            with tempfile.TemporaryDirectory(prefix="morello-sweep-") as folder:
                check(compile_shared(source.c_text, ctx.target, Path(folder)), program, ctx)
        except Exception as exc:  # report every kind of failure and go on
            failed += 1
            print(f"{i}: FAILED {type(exc).__name__}: {exc}\n{text}", flush=True)
            continue
        passed += 1
        seconds = time.perf_counter() - start
        split = f"{action.at} + {action.step}"
        header = text.splitlines()[0].removeprefix("func f").removesuffix(" {")
        print(f"{i}: passed, k = {split}, {seconds:.1f} s: {header}: {statement}", flush=True)
    print(f"{passed} passed, {failed} failed, {not_offered} not offered split_fuse")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
