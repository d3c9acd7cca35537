"""``toy``: a minimal scalar-only target, registered inline by tests and never installed.

Three levels (main memory, one cache, scalar registers), named unlike zen1's so that the
portable ``core`` and ``scalar`` rule sets are seen to name level roles, not levels; cost
coefficients served through the hook. Engine tests and docs use it so
that nothing under ``morello/`` has to name a real machine.
"""

from __future__ import annotations

from morello import CostCoefficients, MemoryLevel, Target, hookimpl
from morello.target import Compiler

TOY = Target(
    name="toy",
    description="a scalar-only test target",
    levels=(
        MemoryLevel(name="DRAM", capacity=1 << 30, line_bytes=64, moves_to=("SRAM",)),
        MemoryLevel(
            name="SRAM", capacity=4 * 1024, line_bytes=64, addressed=False, moves_to=("REG",)
        ),
        MemoryLevel(name="REG", capacity=8, unit="registers"),
    ),
    rule_sets=("core", "scalar"),
    compiler=Compiler(cc="cc", flags=("-O1",)),
    processors=1,
)


@hookimpl
def morello_targets() -> list[Target]:
    """The toy target."""
    return [TOY]


@hookimpl(trylast=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Coefficients for ``toy``; None for any other target."""
    if target.name != TOY.name:
        return None
    return CostCoefficients(
        level_hit={"DRAM": 10, "SRAM": 1, "REG": 0},
        named={"mac": 1, "scalar_op": 1},
    )
