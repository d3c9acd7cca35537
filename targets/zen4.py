"""AMD Zen 4: AVX-512F/BW/VL/DQ/CD and AVX512_BF16 on a core whose FMA pipes are 256 bits wide.

Why a second AVX-512 target beside spr: the machines this project now runs on are Zen 4
EPYCs, so this is the AVX-512 CPU whose code can be compiled, checked and timed on the CPU it
is modelled on; spr stays for Sapphire Rapids, whose FMAs are twice as wide. Zen 4 runs a
512-bit operation as two 256-bit halves: one zmm FMA a cycle over its two FMA pipes, the
same 32 f32 flops a cycle as two ymm FMAs, so the AVX-512 code gains from the 32 registers,
the masks and the bf16 pair dot product, not from the width.

Per core: 32 zmm registers of 16 f32 lanes, 32 KiB 8-way L1D (as Zen 1's), 1 MiB L2; an FMA's
result is ready 4 cycles after it issues. The memory and cost model is zen1's (one zmm FMA or
one zmm load a cycle here, as one ymm FMA or one ymm load a cycle there), with the shorter
FMA latency; the kernels and the 7 x 2^k tile sizes are spr's (``x86_avx512``).

GCC 12 has no ``-march=znver4``: the code is compiled for ``x86-64-v4`` (AVX-512F/BW/CD/DQ/VL
on top of AVX2, FMA, BMI2) plus ``-mavx512bf16``, tuned for Zen 3, the nearest GCC 12 knows.
It runs on any CPU with the features in ``isa``.
"""

from __future__ import annotations

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler, Peer, VectorType

ZEN4 = Target(
    name="zen4",
    description="AMD Zen 4 (AVX-512F/BW/VL, AVX512_BF16; 512-bit ops in two halves)",
    levels=(
        MemoryLevel(name="GL", capacity=1 << 31, line_bytes=64, moves_to=("L1",)),
        # 32 KiB, 8-way, 64-byte lines: zen1's L1, so the same packing decisions apply.
        MemoryLevel(
            name="L1",
            capacity=32 * 1024,
            line_bytes=64,
            addressed=False,
            ways=8,
            packs=("row_major",),
            moves_to=("VRF", "RF"),
        ),
        # The zmm registers and the scalars are one physical file, as on spr; declared as two,
        # as spr's are (BENCHMARKS.md, "spr's registers stay two files", measured on Zen 4).
        MemoryLevel(name="VRF", capacity=32, unit="registers", vector_bytes=(64,)),
        MemoryLevel(name="RF", capacity=16, unit="registers"),
    ),
    vector_types=(VectorType(dtype="f32", lanes=16, c_type="__m512"),),
    layouts=("row_major", "col_major"),
    rule_sets=("core", "scalar", "scalar_exp", "x86_avx512", "x86_avx512_exp"),
    isa=(
        "sse",
        "sse2",
        "pni",
        "ssse3",
        "sse4_1",
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512cd",
        "avx512_bf16",
    ),
    compiler=Compiler(cc="gcc", flags=("-O3", "-march=x86-64-v4", "-mavx512bf16", "-mtune=znver3")),
    # A Ryzen 9 7950X, the desktop Zen 4 part: 16 cores in two 8-core complexes (cores, not
    # SMT threads; --threads lowers it to what a machine has).
    processors=16,
    # The peers of benchmarks, one thread each and free to use every instruction the CPU has:
    # OpenBLAS as NumPy ships it (its own CPU detection), Intel MKL (when installed; on an AMD
    # CPU it picks its own code path, which its verbose log names), NumPy's own loops and
    # JAX's XLA with its AVX-512 code generation and YNNPACK.
    peers=(
        Peer("openblas", {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}),
        Peer(
            "mkl",
            {
                "MKL_THREADING_LAYER": "SEQUENTIAL",
                "MKL_NUM_THREADS": "1",
                "MKL_INTERFACE_LAYER": "LP64",
            },
        ),
        Peer("numpy", {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}),
        Peer(
            "jax",
            {
                "JAX_PLATFORMS": "cpu",
                "NPROC": "1",
                "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
                "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
            },
        ),
    ),
)


@hookimpl
def morello_targets() -> list[Target]:
    """Zen 4 is the one target of this plugin."""
    return [ZEN4]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Default coefficients, roughly reciprocal throughputs in cycles; None for other targets."""
    if target.name != ZEN4.name:
        return None
    return CostCoefficients(
        level_hit={"GL": 20, "L1": 2, "VRF": 0, "RF": 0},
        # zen1's streams: 1..8 concurrent sequential runs of at least 16 lines.
        stream_hit={"GL": (20, 15, 13, 11, 11, 11, 11, 12)},
        stream_lines=16,
        stream_restart={"GL": 800},
        # An FMA's result is ready 4 cycles after it issues; a scalar add's 3.
        chain_latency={"VRF": 4, "RF": 3},
        # Starting a parallel loop's threads and joining them: zen1's figure, measured on
        # this project's machines at 1.7-3 us per loop.
        fork_join=6000,
        named={
            "mac": 2,
            "scalar_op": 1,
            "fma": 1,
            "vector_op": 1,
            "vector_load": 1,
            "vector_store": 1,
        },
    )
