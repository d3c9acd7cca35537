"""Hand-written loop nests for the f32 matvec 1x2048x16384 against OpenBLAS, in one process.

    python benchmarks/matvec_nests.py [--rounds 31]

Builds benchmarks/matvec_nests.c once per nest (the zen1 compiler flags) and the program
Morello synthesizes for examples/matvec_1x2048x16384.lark, checks each against NumPy, then
times them in interleaved rounds with NumPy's matvec (OpenBLAS on one thread, AVX2 kernels).
Prints, per nest, the median over the rounds of NumPy's time over the nest's (above 1.0 is
faster than OpenBLAS) and the range. Run it on a quiet machine; it takes a few minutes.
The nests "in turn" read each row one vector at a time (every output register takes the
rows in turn), the order Morello's C has had since 2026-11-29; the others read a run of
the registers' width from one row before the next.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from morello.plugins import Plugins

ROOT = Path(__file__).resolve().parent.parent
FLAGS = [*Plugins().target("zen1").compiler.flags, "-shared", "-fPIC"]  # as zen1 builds
SPEC = ROOT / "examples" / "matvec_1x2048x16384.lark"
SOURCE = ROOT / "benchmarks" / "matvec_nests.c"
K, N = 2048, 16384
# name: (rows read at once, outputs per block, registers of outputs, prefetch distance,
# rows in turn: 0 reads a run of the registers' width from each row, then the next row;
# 1 gives each output register the rows in turn, one vector each)
NESTS = {
    "4096 outputs, 8 rows": (8, 4096, 8, 0, 0),
    "4096 outputs, 4 rows": (4, 4096, 8, 0, 0),
    "8192 outputs, 4 rows": (4, 8192, 8, 0, 0),
    "whole rows, 4 rows": (4, 16384, 8, 0, 0),
    "whole rows, 4 rows, 4 registers": (4, 16384, 4, 0, 0),
    "whole rows, 8 rows": (8, 16384, 8, 0, 0),
    "whole rows, 16 rows": (16, 16384, 8, 0, 0),
    "4096 outputs, 8 rows, prefetch 1 KiB": (8, 4096, 8, 256, 0),
    "whole rows, 8 rows, 6 registers": (8, 16384, 6, 0, 0),
    "whole rows, 8 rows, 6 registers, in turn": (8, 16384, 6, 0, 1),
    "whole rows, 8 rows, 8 registers, in turn": (8, 16384, 8, 0, 1),
    "whole rows, 8 rows, 2 registers": (8, 16384, 2, 0, 0),
}


def build_nests(folder: Path) -> dict[str, Callable[..., object]]:
    """Compile benchmarks/matvec_nests.c once per nest into ``folder``; name -> function."""
    fns = {}
    for i, (name, (rows, cols, vecs, pf, turns)) in enumerate(NESTS.items()):
        so = folder / f"nest{i}.so"
        defs = [f"-DROWS={rows}", f"-DCOLS={cols}", f"-DVECS={vecs}", f"-DPREFETCH={pf}"]
        defs.append(f"-DTURNS={turns}")
        subprocess.run(["gcc", *FLAGS, *defs, str(SOURCE), "-o", str(so)], check=True)
        fns[name] = ctypes.CDLL(str(so)).nest
    return fns


def operands(seed: int = 0) -> tuple:
    """Random x, w and an output y, each 64-byte aligned, as NumPy arrays."""
    import numpy as np

    def aligned(rows: int, cols: int) -> np.ndarray:
        buf = np.empty(rows * cols + 16, dtype=np.float32)
        off = (-buf.ctypes.data % 64) // 4
        return buf[off : off + rows * cols].reshape(rows, cols)

    rng = np.random.default_rng(seed)
    x, w, y = aligned(1, K), aligned(K, N), aligned(1, N)
    x[:] = rng.random(x.shape)
    w[:] = rng.random(w.shape)
    return x, w, y


def relative_error(fn: Callable[..., object], x, w, y) -> float:
    """Largest error of ``fn(x, w, y)`` against NumPy, relative to the largest output."""
    import numpy as np

    ref = x @ w
    y[:] = 0
    fn(*(ctypes.c_void_p(a.ctypes.data) for a in (x, w, y)))
    return float(np.abs(y - ref).max() / np.abs(ref).max())


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=31, help="interleaved rounds (default 31)")
    args = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    import numpy as np  # after the environment: OpenBLAS reads it when it loads

    with tempfile.TemporaryDirectory() as tmp:
        gen = Path(tmp, "generated")
        cmd = [sys.executable, "-m", "morello", "--target", "zen1", "--no-db", "-o", str(gen)]
        subprocess.run([*cmd, str(SPEC)], check=True)
        so = Path(tmp, "generated.so")
        subprocess.run(["gcc", *FLAGS, str(gen.with_suffix(".c")), "-o", str(so)], check=True)
        fns = {"generated (Morello)": ctypes.CDLL(str(so)).matvec_1x2048x16384}
        fns.update(build_nests(Path(tmp)))
        x, w, y = operands()
        ptrs = [ctypes.c_void_p(a.ctypes.data) for a in (x, w, y)]
        for name, fn in fns.items():
            err = relative_error(fn, x, w, y)
            if err > 1e-4:
                print(f"{name}: wrong result (relative error {err:.1e})", file=sys.stderr)
                return 1

        def seconds(fn, reps: int = 5) -> float:
            t0 = time.perf_counter()
            for _ in range(reps):
                if fn is None:
                    np.matmul(x, w, out=y)
                else:
                    fn(*ptrs)
            return (time.perf_counter() - t0) / reps

        for fn in [None, *fns.values()]:
            seconds(fn)  # warm-up
        ratios: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(args.rounds):
            peer = seconds(None)
            for name, fn in fns.items():
                ratios[name].append(peer / seconds(fn))
    print(f"{'nest':<40} median  range (NumPy time / nest time, {args.rounds} rounds)")
    for name, rs in ratios.items():
        rs.sort()
        print(f"{name:<40} {rs[len(rs) // 2]:.2f}    {rs[0]:.2f}-{rs[-1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
