"""Exhaustive accuracy of the AVX2 exp kernel: all 2^32 f32 inputs against double-precision exp.

    python benchmarks/exp_accuracy.py [--stride N] [--rules FILE] [--kernel NAME] [--cc gcc]

Reads the kernel's C template from its rule file (rules/kernels/x86_avx2_exp.rules,
kernel vexp_f32x8) with the project's parser, renders it into vexp_kernel.h, builds
benchmarks/exp_accuracy.c around it (gcc -O2 -mavx2 -mfma, with -fopenmp where the compiler
has it) and runs it. Prints the maximum relative and ulp errors over the inputs whose true
result is a normal float and where they occur, the counts of overflow, underflow and NaN
mismatches, and exits non-zero on any such mismatch. ``--stride N`` tests every N-th bit
pattern only (N a power of two), for a quick look; the full sweep takes about a minute.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "exp_accuracy.c"
RULES = ROOT / "rules" / "kernels" / "x86_avx2_exp.rules"
KERNEL = "vexp_f32x8"


def kernel_header(rules: Path, kernel: str) -> str:
    """vexp_kernel.h: the kernel's rendered template as ``static inline __m256 vexp_kernel``."""
    sys.path.insert(0, str(ROOT))
    from morello.lang.rule_file import parse_rule_file

    rf = parse_rule_file(rules)
    (k,) = [k for k in rf.kernels if k.name == kernel]
    body = k.render({"src": ("x", "&x"), "dst": ("y", "&y")})
    includes = "".join(f"#include {h}\n" for h in k.includes)
    lines = "\n".join(f"    {line}" for line in body)
    return (
        f"/* Rendered from {rules.name}, kernel {kernel}. */\n{includes}"
        "static inline __m256 vexp_kernel(__m256 x) {\n"
        "    __m256 y;\n"
        f"{lines}\n"
        "    return y;\n"
        "}\n"
    )


def has_openmp(cc: str, folder: Path) -> bool:
    probe = folder / "omp_probe.c"
    probe.write_text("#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n")
    cmd = [cc, "-fopenmp", str(probe), "-o", str(folder / "omp_probe")]
    return subprocess.run(cmd, capture_output=True, check=False).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stride", type=int, default=1, help="test every N-th bit pattern")
    parser.add_argument("--rules", type=Path, default=RULES)
    parser.add_argument("--kernel", default=KERNEL)
    parser.add_argument("--cc", default="gcc")
    args = parser.parse_args()
    if shutil.which(args.cc) is None:
        print(f"C compiler {args.cc!r} not found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="exp-accuracy-") as tmp:
        folder = Path(tmp)
        (folder / "vexp_kernel.h").write_text(kernel_header(args.rules, args.kernel))
        exe = folder / "exp_accuracy"
        omp = ["-fopenmp"] if has_openmp(args.cc, folder) else []
        cmd = [args.cc, "-O2", "-mavx2", "-mfma", *omp, f"-I{folder}", str(SOURCE)]
        subprocess.run([*cmd, "-o", str(exe), "-lm"], check=True)
        print(
            f"kernel {args.kernel} from {args.rules}; built with: {' '.join(cmd[: 4 + len(omp)])}"
        )
        start = time.perf_counter()
        rc = subprocess.run([str(exe), str(args.stride)], check=False).returncode
        print(f"sweep took {time.perf_counter() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
