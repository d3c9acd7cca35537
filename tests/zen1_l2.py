"""``zen1_l2``: zen1 with a small L2 that holds whole Specs, registered inline by tests.

The L2 of ``L2_BYTES`` is filled by the hardware (``MemoryLevel.whole_specs``), a line there
at 6: a Spec whose main-memory operands fit it together is resident (a forced ``reside``
action). Tests of residency subclass the plugin to change the level or add another.
"""

from __future__ import annotations

import attrs

from morello import CostCoefficients, MemoryLevel, Target, hookimpl

L2_BYTES = 4096  # 64 lines: small products fit, 16^3 does not


class Zen1L2:
    """zen1 with an L2 of ``L2_BYTES`` that holds whole Specs (a plugin); a subclass that
    declares another L2 names its target ``name``, and its L2 line costs 6 as here."""

    name = "zen1_l2"

    @hookimpl
    def morello_targets(self) -> list[Target]:
        from morello_targets.zen1 import ZEN1

        l2 = MemoryLevel(
            name="L2", capacity=L2_BYTES, addressed=False, whole_specs=True, moves_to=("L1",)
        )
        gl, *rest = (lv for lv in ZEN1.levels if lv.name != "L2")  # zen1's own L2 replaced
        gl = attrs.evolve(gl, moves_to=(*(m for m in gl.moves_to if m != "L2"), "L2"))
        return [attrs.evolve(ZEN1, name=self.name, levels=(gl, l2, *rest))]

    @hookimpl
    def morello_cost_coefficients(self, target: Target) -> CostCoefficients | None:
        from morello_targets.zen1 import ZEN1, morello_cost_coefficients

        if target.name != self.name:
            return None
        base = morello_cost_coefficients(ZEN1)
        return attrs.evolve(base, level_hit={**base.level_hit, "L2": 6})
