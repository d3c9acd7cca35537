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
FMA latency and the L2, which holds whole Specs (residency, ``morello.nodes.reside``); the
kernels and the 7 x 2^k tile sizes are spr's (``x86_avx512``).

GCC 12 has no ``-march=znver4``: the code is compiled for ``x86-64-v4`` (AVX-512F/BW/CD/DQ/VL
on top of AVX2, FMA, BMI2) plus ``-mavx512bf16``, tuned for Zen 3, the nearest GCC 12 knows.
It runs on any CPU with the features in ``isa``.
"""

from __future__ import annotations

import attrs
from morello_targets import spr, zen1

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler

ZEN4 = Target(
    name="zen4",
    description="AMD Zen 4 (AVX-512F/BW/VL, AVX512_BF16; 512-bit ops in two halves)",
    levels=(
        MemoryLevel(
            name="GL", capacity=1 << 31, line_bytes=64, moves_to=("L1", "L2"), per_buffer=True
        ),
        # 1 MiB, filled by the hardware: a Spec whose main-memory operands fit here together
        # is resident, and its reads after the first are priced at this level, not at main
        # memory's (BENCHMARKS.md, "zen4: the AVX-512 target on its own CPU": without it the
        # model priced a strip's re-reads of A as main-memory lines and chose a slower nest).
        MemoryLevel(
            name="L2",
            capacity=1 << 20,
            line_bytes=64,
            addressed=False,
            whole_specs=True,
            moves_to=("L1",),
        ),
        # 32 KiB, 8-way, 64-byte lines: zen1's L1, so the same packing decisions apply.
        zen1.ZEN1.level("L1"),
        # The zmm registers and the scalars are one physical file, as on spr; declared as two,
        # as spr's are (BENCHMARKS.md, "spr's registers stay two files", measured on Zen 4).
        spr.SPR.level("VRF"),
        spr.SPR.level("RF"),
    ),
    # spr's kernels (the same instructions), so its vector types, rule sets and the CPU
    # features they need.
    vector_types=spr.SPR.vector_types,
    layouts=spr.SPR.layouts,
    rule_sets=spr.SPR.rule_sets,
    isa=spr.SPR.isa,
    compiler=Compiler(cc="gcc", flags=("-O3", "-march=x86-64-v4", "-mavx512bf16", "-mtune=znver3")),
    # A Ryzen 9 7950X, the desktop Zen 4 part: 16 cores in two 8-core complexes (cores, not
    # SMT threads; --threads lowers it to what a machine has).
    processors=16,
    # spr's peers, one thread each and free to use every instruction the CPU has: OpenBLAS
    # as NumPy ships it (its own CPU detection), Intel MKL (when installed; on an AMD CPU it
    # picks its own code path, which its verbose log names), NumPy's own loops and JAX's XLA
    # with its AVX-512 code generation and YNNPACK.
    peers=spr.SPR.peers,
)


@hookimpl
def morello_targets() -> list[Target]:
    """Zen 4 is the one target of this plugin."""
    return [ZEN4]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """zen1's default coefficients (one zmm FMA or load a cycle here, as one ymm FMA or load
    a cycle there), with an FMA's result ready 4 cycles after it issues and bursts of streams
    modelled (a register tile of 32 zmm can take 32 lines of a row at once); None for other
    targets."""
    if target.name != ZEN4.name:
        return None
    defaults = zen1.morello_cost_coefficients(zen1.ZEN1)
    assert defaults is not None
    return attrs.evolve(
        defaults,
        # An L2 line costs 6, against 2 for the L1 and 20 for main memory.
        level_hit={**defaults.level_hit, "L2": 6},
        chain_latency={**defaults.chain_latency, "VRF": 4},
        # 8 rows of a matrix read at once keep 8 streams in flight in bursts of up to 16
        # lines from a row; in longer bursts they read as slowly as one row alone (15-20%
        # slower on a Zen 4: BENCHMARKS.md, "Bursts"; benchmarks/stream_bursts.c).
        stream_burst={"GL": 16},
    )
