"""Intel Sapphire Rapids (4th-generation Xeon Scalable): AVX-512F/BW/VL and AVX512_BF16.

Why Sapphire Rapids: it was the AVX-512 CPU of this project's machines when the target was
written, so its code was compiled, checked and timed on the CPU it is tuned for; and its
512-bit FMAs are full-width (two FMA units on ports 0 and 5, 32 f32 FMAs a cycle) where Zen 4
splits a zmm FMA into two 256-bit halves, which changes which register tiles pay off. The
later machines are Zen 4s, whose target is ``zen4`` (targets/zen4.py), with the same kernels.

Per core: 32 zmm registers of 16 f32 lanes, 48 KiB 12-way L1D, 2 MiB L2; an FMA's result is
ready 4 cycles after it issues, so two FMA pipes need at least 8 independent accumulators and
a register tile of 14 x 32 (28 zmm accumulators, 2 rows of B, 1 broadcast) fills the file.
``vdpbf16ps`` multiplies pairs of bf16 and adds both products into f32 lanes.

Generated code is compiled with ``-march=sapphirerapids``; it runs on CPUs with the features
in ``isa`` (Sapphire Rapids, Emerald Rapids, Granite Rapids).
"""

from __future__ import annotations

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler, Peer, VectorType

SPR = Target(
    name="spr",
    description="Intel Sapphire Rapids (AVX-512F/BW/VL, AVX512_BF16)",
    levels=(
        MemoryLevel(name="GL", capacity=1 << 31, line_bytes=64, moves_to=("L1",), per_buffer=True),
        # 48 KiB, 12-way: 64 sets of 64-byte lines, as zen1's L1 has, with 4 more ways.
        MemoryLevel(
            name="L1",
            capacity=48 * 1024,
            line_bytes=64,
            addressed=False,
            ways=12,
            packs=("row_major",),
            moves_to=("VRF", "RF"),
        ),
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
    # -march lets GCC use everything Sapphire Rapids has in the code around the kernels
    # (scalar loops, address arithmetic); the kernels name their instructions themselves.
    compiler=Compiler(cc="gcc", flags=("-O3", "-march=sapphirerapids", "-mtune=sapphirerapids")),
    # A Xeon Platinum 8480+ has 56 cores; a `parallel func` may use up to that many threads.
    processors=56,
    # The peers of benchmarks, one thread each and free to use every instruction the CPU
    # has (no ISA limit): OpenBLAS as NumPy ships it (its own CPU detection picks its
    # SkylakeX/Cooperlake/SapphireRapids kernels), Intel MKL (when installed), NumPy's own
    # loops and JAX's XLA with its AVX-512 code generation and YNNPACK.
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
        # NPROC sizes XLA's CPU thread pool; YNNPACK and oneDNN run in it too.
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
    """Sapphire Rapids is the one target of this plugin."""
    return [SPR]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Default coefficients, roughly reciprocal throughputs in cycles; None for other targets."""
    if target.name != SPR.name:
        return None
    return CostCoefficients(
        level_hit={"GL": 20, "L1": 2, "VRF": 0, "RF": 0},
        # Main-memory lines read as 1..8 concurrent streams; as zen1's, a run of at least 16
        # lines is a stream, and a core reads several streams faster than one.
        stream_hit={"GL": (20, 15, 13, 11, 11, 11, 11, 12)},
        stream_lines=16,
        stream_restart={"GL": 800},
        # An FMA's result is ready 4 cycles after it issues; a scalar add's 1 (3 for float).
        chain_latency={"VRF": 4, "RF": 3},
        # Starting a parallel loop's threads and joining them (libgomp): zen1's figure, measured
        # on this project's machine (a Sapphire Rapids) at 1.7-3 us per loop.
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
