"""The vector exp kernels (rules/kernels/x86_avx2_exp.rules, vexp_f32x8, and
rules/kernels/arm_neon_exp.rules, nexp_f32x4) against float64 exp.

Each kernel's C template is read with the rule-file parser, rendered into a loop over an
array and compiled with its target's compiler and flags into a shared library, called
natively or, for the NEON kernel off ARM, under qemu through morello's emulation driver;
NumPy computes the reference in double precision. Checked: relative error at most REL_BOUND
(also stated in each rule file) on a dense sample of [-104, 89], around the reduction and
overflow/underflow boundaries and on random bit patterns, wherever the true result is a
normal float; overflow to +inf; underflow to 0 or a subnormal; NaN in, NaN out; exp(0) == 1;
a template rendered with src and dst the same variable gives the same results; and the NEON
kernel gives the AVX2 kernel's bits wherever the input is not NaN. Each kernel runs where
its target is the one under test. The exhaustive sweep over all 2^32 inputs is
benchmarks/exp_accuracy.py (AVX2).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest

from morello.codegen import runner
from morello.codegen.compile import compile_shared
from morello.lang.rule_file import parse_rule_file
from morello.plugins import Plugins
from morello.rules.kernels import Kernel

RULES = Path(__file__).resolve().parents[2] / "rules" / "kernels"
#: Largest relative error allowed where the true result is a normal float. The exhaustive
#: sweep measured 7.63e-8 (0.89 ulp); each rule file states this bound as "REL_BOUND = 1.0e-7".
REL_BOUND_TEXT = "1.0e-7"
REL_BOUND = float(REL_BOUND_TEXT)
FLT_MIN = float(np.finfo(np.float32).tiny)
LN2 = float(np.log(2.0))


@attrs.frozen
class ExpKernel:
    """A vector exp kernel, its target, and how a loop loads and stores its register type."""

    rules: str
    name: str
    target: str
    lanes: int
    vector: str
    load: str
    store: str

    def kernel(self) -> Kernel:
        (kernel,) = [k for k in parse_rule_file(RULES / self.rules).kernels if k.name == self.name]
        return kernel


AVX2 = ExpKernel("x86_avx2_exp.rules", "vexp_f32x8", "zen1", 8, "__m256", "_mm256_loadu_ps",
                 "_mm256_storeu_ps")  # fmt: skip
NEON = ExpKernel("arm_neon_exp.rules", "nexp_f32x4", "neoverse_n1", 4, "float32x4_t",
                 "vld1q_f32", "vst1q_f32")  # fmt: skip
KERNELS = (AVX2, NEON)


def _loop(k: ExpKernel, name: str, body: list[str]) -> str:
    lines = "\n".join(f"        {line}" for line in body)
    return (
        f"void {name}(const int64_t *n, const float *in, float *out) {{\n"
        f"    for (int64_t i = 0; i + {k.lanes} <= *n; i += {k.lanes}) {{\n"
        f"        {k.vector} x = {k.load}(in + i);\n"
        f"        {k.vector} y;\n"
        f"{lines}\n"
        f"        {k.store}(out + i, y);\n"
        "    }\n"
        "}\n"
    )


class VExp:
    """A compiled kernel: ``vexp(x)`` (src and dst distinct) and ``vexp.inplace(x)``."""

    def __init__(self, k: ExpKernel, folder: Path) -> None:
        kernel = k.kernel()
        self.target = Plugins().target(k.target)
        # The kernel under test was checked by its runs_code mark (tests/conftest.py);
        # this skips only the AVX2 side of the NEON comparison, on an ARM machine.
        why = runner.cannot_run(self.target, kernel.requires)
        if why:
            pytest.skip(why)
        self.lanes = k.lanes
        source = (
            "".join(f"#include {h}\n" for h in kernel.includes)
            + "#include <stdint.h>\n"
            + _loop(k, "vexp", kernel.render({"src": ("x", "&x"), "dst": ("y", "&y")}))
            + _loop(
                k,
                "vexp_inplace",
                [*kernel.render({"src": ("x", "&x"), "dst": ("x", "&x")}), "y = x;"],
            )
        )
        self.lib = compile_shared(source, self.target, folder, "vexp")

    def _call(self, fn: str, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32).ravel()
        n = len(x)
        padded = np.zeros((n + self.lanes - 1) // self.lanes * self.lanes, dtype=np.float32)
        padded[:n] = x
        out = np.empty_like(padded)
        count = np.array([len(padded)], dtype=np.int64)
        runner.call(self.lib, fn, [count, padded, out], self.target)
        return out[:n]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self._call("vexp", x)

    def inplace(self, x: np.ndarray) -> np.ndarray:
        return self._call("vexp_inplace", x)


def _marks(k: ExpKernel) -> list[pytest.MarkDecorator]:
    """Run where ``k``'s target is under test and its CPU features are there (or emulated)."""
    return [pytest.mark.target(k.target), pytest.mark.runs_code(*k.kernel().requires)]


@pytest.fixture(
    scope="module",
    params=[pytest.param(k, marks=_marks(k), id=k.name) for k in KERNELS],
)
def vexp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> VExp:
    return VExp(request.param, tmp_path_factory.mktemp(request.param.name))


def _around(centres: np.ndarray, ulps: int) -> np.ndarray:
    """All floats within ``ulps`` steps of each (float32) centre."""
    bits = np.asarray(centres, dtype=np.float32).view(np.int32).astype(np.int64)
    steps = np.arange(-ulps, ulps + 1)
    near = (bits[:, None] + steps[None, :]).ravel()
    return near.astype(np.int32).view(np.float32)


def _sample() -> np.ndarray:
    rng = np.random.default_rng(20240607)
    dense = np.linspace(-104.0, 89.0, 3_000_000).astype(np.float32)
    # Where the reduction switches n (|r| largest), and the overflow / underflow edges.
    halfway = (np.arange(-151, 129) + 0.5) * LN2
    edges = np.array([np.log(np.finfo(np.float32).max), np.log(FLT_MIN), -103.972, 0.0])
    random_bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    small = rng.uniform(-1.0, 1.0, size=200_000) * 2.0 ** rng.integers(-40, 0, size=200_000)
    return np.concatenate(
        [
            dense,
            _around(halfway, 64),
            _around(edges, 4096),
            random_bits.view(np.float32),
            small.astype(np.float32),
        ]
    )


@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.name)
def test_rule_file_states_the_bound(k: ExpKernel) -> None:
    assert f"REL_BOUND = {REL_BOUND_TEXT}" in (RULES / k.rules).read_text(encoding="utf-8")


def test_check_tolerance_covers_the_bound() -> None:
    # --check allows FUNC_ROUNDINGS["exp"] unit roundoffs of its own for each exp.
    from morello.rules.index_notation import FUNC_ROUNDINGS

    assert FUNC_ROUNDINGS["exp"] * 2.0**-24 >= REL_BOUND


def test_accuracy(vexp: VExp) -> None:
    x = _sample()
    x = x[~np.isnan(x)]
    y = vexp(x).astype(np.float64)
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float64))
        ef = e.astype(np.float32)
    normal = (e >= FLT_MIN) & np.isfinite(ef)
    assert normal.sum() > 3_000_000
    rel = np.abs(y[normal] - e[normal]) / e[normal]
    worst = int(np.argmax(rel))
    assert rel[worst] <= REL_BOUND, (
        f"relative error {rel[worst]:.3g} at x = {x[normal][worst]!r} "
        f"(kernel {y[normal][worst]!r}, exp {e[normal][worst]!r})"
    )
    overflow = np.isinf(ef)
    assert np.all(y[overflow] == np.inf), x[overflow][y[overflow] != np.inf][:10]
    tiny = e < FLT_MIN
    bad = ~((y[tiny] >= 0.0) & (y[tiny] <= 2 * FLT_MIN))
    assert not bad.any(), x[tiny][bad][:10]


def test_overflow(vexp: VExp) -> None:
    # 88.72283: the largest float whose exp is finite (the float nearest ln(FLT_MAX) is above).
    largest = np.array([0x42B17217], dtype=np.uint32).view(np.float32)[0]
    assert np.exp(np.float64(largest)) < np.finfo(np.float32).max
    x = np.array([88.8, 89.0, 100.0, 1e30, np.finfo(np.float32).max, np.inf], dtype=np.float32)
    assert np.all(vexp(x) == np.inf)
    y = vexp(np.array([largest], dtype=np.float32))[0]
    assert np.isfinite(y) and abs(y / np.exp(np.float64(largest)) - 1) <= REL_BOUND
    above = np.nextafter(largest, np.float32(np.inf))  # exp rounds to +inf from here on
    assert vexp(np.array([above], dtype=np.float32))[0] == np.inf


def test_underflow(vexp: VExp) -> None:
    x = np.array([-104.0, -110.0, -1000.0, -1e30, -np.finfo(np.float32).max, -np.inf])
    y = vexp(x.astype(np.float32))
    assert np.all(y == 0.0), y
    assert not np.signbit(y).any()
    # Gradual underflow: subnormal results, never above twice the smallest normal.
    x = np.linspace(-103.9, -87.3, 100_000).astype(np.float32)
    y = vexp(x)
    assert np.all((y >= 0.0) & (y <= 2 * FLT_MIN))
    assert np.all(np.diff(y) >= 0.0)


def test_nan(vexp: VExp) -> None:
    patterns = np.array(
        [0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFFFFFFF, 0x7F800001, 0xFF800001, 0x7FBFFFFF],
        dtype=np.uint32,
    )
    y = vexp(patterns.view(np.float32))
    assert np.all(np.isnan(y)), y


def test_exact_values(vexp: VExp) -> None:
    y = vexp(np.array([0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30], dtype=np.float32))
    assert np.all(y == 1.0), y


def test_src_and_dst_may_be_one_variable(vexp: VExp) -> None:
    x = np.linspace(-120.0, 100.0, 100_003).astype(np.float32)
    np.testing.assert_array_equal(vexp.inplace(x), vexp(x))


@pytest.mark.target(NEON.target)
@pytest.mark.runs_code(*NEON.kernel().requires)
def test_neon_gives_the_avx2_kernels_bits(tmp_path: Path) -> None:
    # The same IEEE operations in the same order, so the same results (NaN aside: the clamp
    # passes it differently, and both give NaN, test_nan).
    neon = VExp(NEON, tmp_path / "neon")
    avx2 = VExp(AVX2, tmp_path / "avx2")  # skipped on an ARM machine
    x = _sample()
    x = x[~np.isnan(x)]
    np.testing.assert_array_equal(neon(x).view(np.uint32), avx2(x).view(np.uint32))
