"""Arm Neoverse N1 (AWS Graviton2, Ampere Altra): AArch64 with NEON, 32 128-bit registers,
64 KiB L1D (4-way) and 1 MiB L2 per core.

Chosen as the AArch64 target because it is the most widely deployed server core of its
generation, with a plain 4-lane NEON FMA pipeline (two 128-bit FMA units) and no SVE, so
the kernels are the portable NEON ones. Generated code is cross-compiled with Debian's
``gcc-aarch64-linux-gnu`` (``-mcpu=neoverse-n1``) and, on a machine that is not AArch64,
run under ``qemu-aarch64`` (Debian's ``qemu-user``) for ``--check`` and the tests; no speed
is claimed for it there, and ``bench`` refuses.
"""

from __future__ import annotations

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler, Platform, VectorType

NEOVERSE_N1 = Target(
    name="neoverse_n1",
    description="Arm Neoverse N1 (AArch64 NEON; runs under qemu-aarch64 on other machines)",
    levels=(
        MemoryLevel(name="GL", capacity=1 << 31, line_bytes=64, moves_to=("L1",), per_buffer=True),
        MemoryLevel(
            name="L1",
            capacity=64 * 1024,
            line_bytes=64,
            addressed=False,
            ways=4,
            packs=("row_major",),
            moves_to=("VRF", "RF"),
        ),
        # 32 V registers of 128 bits; scalars used by the FMA by element live there too, so
        # the scalar register file is a small share of them.
        MemoryLevel(name="VRF", capacity=32, unit="registers", vector_bytes=(16,)),
        MemoryLevel(name="RF", capacity=16, unit="registers"),
    ),
    vector_types=(VectorType(dtype="f32", lanes=4, c_type="float32x4_t"),),
    layouts=("row_major", "col_major"),
    rule_sets=("core", "scalar", "scalar_exp", "arm_neon", "arm_neon_exp"),
    # As /proc/cpuinfo's "Features" line names them on an N1.
    isa=(
        "fp",
        "asimd",
        "evtstrm",
        "aes",
        "pmull",
        "sha1",
        "sha2",
        "crc32",
        "atomics",
        "fphp",
        "asimdhp",
        "cpuid",
        "asimdrdm",
        "lrcpc",
        "dcpop",
        "asimddp",
    ),
    compiler=Compiler(
        cc="aarch64-linux-gnu-gcc",
        flags=("-O3", "-mcpu=neoverse-n1"),
        package="Debian's gcc-aarch64-linux-gnu",
    ),
    platform=Platform(
        arch="aarch64",
        features_field="Features",
        emulator=("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"),
        emulator_package="Debian's qemu-user",
    ),
    # A Graviton2 has 64 N1 cores; a `parallel func` may use up to that many threads
    # (OpenMP, with the cross compiler's libgomp; qemu-user runs them as host threads).
    processors=64,
)


@hookimpl
def morello_targets() -> list[Target]:
    """Neoverse N1 is the one target of this plugin."""
    return [NEOVERSE_N1]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Default coefficients, roughly reciprocal throughputs in cycles (set by analogy with
    zen1's and the N1 optimization guide; not fitted on an N1, since none is at hand)."""
    if target.name != NEOVERSE_N1.name:
        return None
    return CostCoefficients(
        level_hit={"GL": 20, "L1": 2, "VRF": 0, "RF": 0},
        # An FMA's result is ready 4 cycles after it issues (N1: fmla 4 cycles, 2 pipes).
        chain_latency={"VRF": 4, "RF": 4},
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
