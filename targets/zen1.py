"""AMD Zen 1: AVX2 + FMA, 16 ymm registers, 32 KiB L1D and 512 KiB L2 per core.

Generated code is compiled with ``-mavx2 -mfma -mtune=znver1`` (not ``-march``), so it runs on
any x86-64 CPU with AVX2 and FMA, and with ``-mno-avx256-split-unaligned-store``, which keeps
GCC's Zen 1 tuning from writing each 256-bit store as two halves.
"""

from __future__ import annotations

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler, Peer, VectorType

ZEN1 = Target(
    name="zen1",
    description="AMD Zen 1 (runs on any x86-64 with AVX2 and FMA)",
    levels=(
        MemoryLevel(name="GL", capacity=1 << 31, line_bytes=64, moves_to=("L1",), per_buffer=True),
        # 8-way: a tile of more than 8 strided rows may evict itself, so a move may pack it
        # into a contiguous row-major buffer (a panel of B as the FMA kernels read it).
        MemoryLevel(
            name="L1",
            capacity=32 * 1024,
            line_bytes=64,
            addressed=False,
            ways=8,
            packs=("row_major",),
            moves_to=("VRF", "RF"),
        ),
        # One file of 16 ymm registers: an f32 scalar lives in the low lane of one. A single
        # scalar moved into RF folds into the vbroadcastss of the FMAs that read it and costs
        # no vector register; a larger block of scalars is held across its uses (gcc hoists
        # its broadcasts) and takes vector registers too (docs/design-notes.md).
        MemoryLevel(name="VRF", capacity=16, unit="registers", vector_bytes=(32,), shares=("RF",)),
        MemoryLevel(name="RF", capacity=16, unit="registers", shares=("VRF",), folds=1),
    ),
    vector_types=(
        VectorType(dtype="f32", lanes=8, c_type="__m256", pin='__asm__("" : "+x"({v}));'),
    ),
    layouts=("row_major", "col_major"),
    rule_sets=("core", "scalar", "scalar_exp", "x86_avx2", "x86_avx2_exp"),
    isa=("sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c"),
    # -mtune=znver1 alone makes GCC split each 256-bit store to memory it cannot prove
    # 32-byte aligned into two 128-bit stores (vmovups + vextractf128): a register tile
    # stored every 8 steps of k then issues twice the stores. Whole stores made
    # 8x512x512 and 4x1024x1024 12-16% faster on a Zen 4 (BENCHMARKS.md, "Whole 256-bit
    # stores"; not measured on a Zen 1, whose 128-bit units take a 256-bit store in two
    # halves either way).
    compiler=Compiler(
        cc="gcc",
        flags=("-O3", "-mavx2", "-mfma", "-mtune=znver1", "-mno-avx256-split-unaligned-store"),
    ),
    # A Ryzen 7 1700, the desktop Zen 1 part: 8 cores in two 4-core complexes. Cores, not
    # its 16 SMT threads: two threads of a core share its FMA pipes, which one thread of
    # these kernels already fills. --threads lowers it (to the cores a machine has).
    processors=8,
    # The peers of benchmarks, one thread each and held to the instructions Zen 1 has, so
    # none runs AVX-512 code on a machine that has it: NumPy's OpenBLAS with its Haswell
    # (AVX2 + FMA) kernels, and Intel MKL (when installed) limited to AVX2, for products;
    # NumPy and JAX (when installed) running any op or graph.
    peers=(
        Peer(
            "openblas",
            {"OPENBLAS_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell", "OMP_NUM_THREADS": "1"},
        ),
        Peer(
            "mkl",
            {
                "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                "MKL_THREADING_LAYER": "SEQUENTIAL",
                "MKL_NUM_THREADS": "1",
                "MKL_INTERFACE_LAYER": "LP64",
            },
            # Zen 1 has no bf16 instructions; held to AVX2, MKL's bf16 product with one row
            # runs a reference path at about 0.3 GFLOP/s, which says nothing of Zen 1.
            skip={"gemm_bf16": "Zen 1 has no bf16 instructions (MKL held to AVX2)"},
        ),
        # The op as array code: NumPy's sequence of its ops, with the OpenBLAS settings above
        # for its matrix products and its own loops held to AVX2 (NumPy 2.4 names its AVX-512
        # levels X86_V4, AVX512_ICL, AVX512_SPR, and ignores the older names that follow).
        Peer(
            "numpy",
            {
                "OPENBLAS_NUM_THREADS": "1",
                "OPENBLAS_CORETYPE": "Haswell",
                "OMP_NUM_THREADS": "1",
                "NPY_DISABLE_CPU_FEATURES": (
                    "X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_KNL AVX512_KNM "
                    "AVX512_SKX AVX512_CLX AVX512_CNL"
                ),
            },
        ),
        # JAX's jax.jit of the whole op (XLA on the CPU), one thread: NPROC sizes XLA's CPU
        # thread pool. Held to AVX2: xla_cpu_max_isa caps XLA's generated code, and matrix
        # products run in oneDNN, capped by ONEDNN_MAX_CPU_ISA; YNNPACK, which XLA would
        # otherwise call for products and reductions, ignores both and runs AVX-512 code, so
        # its fusions are turned off. (XLA stops reading XLA_FLAGS at a word without "--".)
        Peer(
            "jax",
            {
                "JAX_PLATFORMS": "cpu",
                "NPROC": "1",
                "XLA_FLAGS": (
                    "--xla_cpu_multi_thread_eigen=false --xla_cpu_max_isa=AVX2 "
                    "--xla_cpu_experimental_ynn_fusion_type="
                ),
                "ONEDNN_MAX_CPU_ISA": "AVX2",
                "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
            },
        ),
    ),
)


@hookimpl
def morello_targets() -> list[Target]:
    """Zen 1 is the one target of this plugin."""
    return [ZEN1]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Default coefficients, roughly reciprocal throughputs in cycles; None for other targets."""
    if target.name != ZEN1.name:
        return None
    return CostCoefficients(
        level_hit={"GL": 20, "L1": 2, "VRF": 0, "RF": 0},
        # Main-memory lines read as 1..8 concurrent sequential streams: one stream reaches
        # about 15 GB/s on one core, two about 20, four about 28 (BENCHMARKS.md, bf16 matvec).
        # A stream is a run of at least 16 lines (1 KiB); shorter runs, or more of them, are
        # a strided walk (twice the line cost).
        stream_hit={"GL": (20, 15, 13, 11, 11, 11, 11, 12)},
        stream_lines=16,
        # Starting a stream again costs about one memory latency (~100 ns): blocks of 4096
        # columns of a streamed matvec's weights restart 8192 runs where whole rows restart
        # 2048, and ran 0.6 ms slower (BENCHMARKS.md, "a nest the model could not rank").
        stream_restart={"GL": 800},
        # Restarts and strided walks are charged for operands used up to 8 times an element:
        # a 4- or 8-row matmul reuses B only inside a register tile or two. Charging them
        # made 4x1024x1024 11-16% faster, 8x512x512 3% and mlp 2-5% (BENCHMARKS.md, "B
        # walked from main memory's side"); the other shapes kept their programs.
        stream_reuse=8,
        # An FMA's result is ready 5 cycles after it issues; a scalar add's 3.
        chain_latency={"VRF": 5, "RF": 3},
        # Starting a parallel loop's threads and joining them (GCC's libgomp, threads kept
        # spinning between loops): 1.7-3 us per loop on the 2-core machine of BENCHMARKS.md
        # when it was quiet (4300-8100 cycles at 2.6 GHz), far more when it was not.
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
