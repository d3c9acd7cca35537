"""The dense layer of examples/dense_relu.lark three ways, timed in one process.

    python benchmarks/fused_dense_relu.py [--rounds 31]

Issue 14 asks for the register-level fusion of ``relu(add(matmul(x, w), b))``: the matmul's
output tile kept in registers across all of K while the bias is added and ReLU applied.
With K = 512 that tile's 24-column panel of w is 48 KiB and no longer fits zen1's L1, and
the program Morello picks instead computes each 128x24 block of the product into an L1
buffer, then applies bias and ReLU from there. This script measures what the choice costs:

- **generated**: the program Morello synthesizes for examples/dense_relu.lark;
- **fused**: benchmarks/fused_dense_relu.c, the register-fused form written by hand (4x24
  accumulators over all of K, the panel packed once per 24 columns);
- **matmul alone**: the program Morello synthesizes for ``matmul(x, w)`` of the same shape.

Each is compiled with zen1's flags, checked against NumPy, then timed in interleaved rounds
(a batch of calls each per round). Prints the median time per call and, per round, the
ratios of the times, with their median and range. Synthesis takes a minute or two (one
memo table in a temporary folder serves both products); run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from morello.plugins import Plugins

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "fused_dense_relu.c"
FLAGS = [*Plugins().target("zen1").compiler.flags, "-shared", "-fPIC"]  # as zen1 builds
M, K, N = 128, 512, 512
MATMUL = f"""\
func matmul_alone(x: f32[{M}, {K}], w: f32[{K}, {N}]) -> y: f32[{M}, {N}] {{
    y = matmul(x, w)
}}
"""


def synthesize(spec: Path, name: str, db: Path, folder: Path) -> Callable[..., object]:
    """Synthesize ``spec`` for zen1, compile it; its function ``name``."""
    out = folder / name
    cmd = [sys.executable, "-m", "morello", "--target", "zen1", "--db", str(db)]
    subprocess.run([*cmd, "-o", str(out), str(spec)], check=True)
    return compile_c(out.with_suffix(".c"), name, folder)


def compile_c(source: Path, name: str, folder: Path) -> Callable[..., object]:
    """Compile ``source`` with zen1's flags into ``folder``; its function ``name``."""
    so = folder / f"{source.stem}.so"
    subprocess.run(["gcc", *FLAGS, str(source), "-o", str(so)], check=True)
    return getattr(ctypes.CDLL(str(so)), name)


def operands(seed: int = 0) -> tuple:
    """Random x, w, b and an output y, as NumPy arrays."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    return x, w, b, np.empty((M, N), dtype=np.float32)


def arguments(x, w, b, y, *, bias: bool = True) -> list[ctypes.c_void_p]:
    """The pointers to pass: ``x, w, b, y`` for the layer, ``x, w, y`` for the product alone."""
    return [ctypes.c_void_p(a.ctypes.data) for a in ((x, w, b, y) if bias else (x, w, y))]


def relative_error(fn: Callable[..., object], x, w, b, y, *, bias: bool = True) -> float:
    """Largest error of ``fn(x, w, b, y)`` (``fn(x, w, y)`` with ``bias=False``, the
    product alone) against NumPy in f64, relative to the largest output."""
    import numpy as np

    ref = x.astype(np.float64) @ w.astype(np.float64)
    if bias:
        ref = np.maximum(ref + b, 0.0)
    y[:] = np.nan
    fn(*arguments(x, w, b, y, bias=bias))
    return float(np.abs(y - ref).max() / np.abs(ref).max())


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=31, help="interleaved rounds (default 31)")
    ap.add_argument("--batch", type=int, default=50, help="calls per timed batch (default 50)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "memo.sqlite3"
        (folder / "matmul_alone.lark").write_text(MATMUL)
        fns = {
            "generated": synthesize(
                ROOT / "examples" / "dense_relu.lark", "dense_relu", db, folder
            ),
            "fused": compile_c(SOURCE, "fused", folder),
            "matmul alone": synthesize(folder / "matmul_alone.lark", "matmul_alone", db, folder),
        }
        x, w, b, y = operands()
        calls = {}
        for name, fn in fns.items():
            bias = name != "matmul alone"
            err = relative_error(fn, x, w, b, y, bias=bias)
            if not err < 1e-5:
                print(f"{name}: wrong result (relative error {err:.1e})", file=sys.stderr)
                return 1
            calls[name] = (fn, arguments(x, w, b, y, bias=bias))

        def seconds(name: str) -> float:
            fn, ptrs = calls[name]
            t0 = time.perf_counter()
            for _ in range(args.batch):
                fn(*ptrs)
            return (time.perf_counter() - t0) / args.batch

        for name in calls:
            seconds(name)  # warm-up
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name in calls:
                times[name].append(seconds(name))

    def median(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    print(f"median time per call over {args.rounds} rounds of {args.batch} calls")
    for name, ts in times.items():
        print(f"  {name:<14} {median(ts) * 1e6:8.1f} us")
    print("ratios per round (median, range)")
    for a, c in (("generated", "fused"), ("generated", "matmul alone"), ("fused", "matmul alone")):
        rs = sorted(p / q for p, q in zip(times[a], times[c], strict=True))
        print(f"  {a} / {c}: {median(rs):.3f} ({rs[0]:.3f}-{rs[-1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
