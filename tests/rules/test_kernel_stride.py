"""``{stride(x)}`` in a kernel template: a row's stride, for strided tiles only.

A kernel added in a temporary rule file reads two rows of ``a`` through ``{stride(a)}``.
It is the only kernel of its op, so every program below uses it; the compiled C must match
NumPy for a matrix stored row-major, column-major and in packed row blocks (whose tiles of
one block are strided too). A tile whose layout keeps packed blocks has no fixed stride,
and the kernel does not match it.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from morello.codegen import harness
from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.dtypes import dtype
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.layout import Layout, layout_by_name
from morello.nodes import KernelAction
from morello.rules.kernels import is_strided
from morello.rules.ruleset import layout_named
from morello.search.solve import synthesize
from morello.spec import Spec, TensorSpec

pytestmark = [pytest.mark.target("zen1"), pytest.mark.runs_code]

RULES = """\
# Rule set "two_rows": two rows of a matrix times one element of a vector.
kernel dot2_rows_f32:
    c: f32[2] @L1 contiguous += matmul(a: f32[2, 1] @L1, b: f32[1] @L1)
    cost 2 * mac
    c "(&{c})[0] += {a} * {b};"
      "(&{c})[1] += (&{a})[{stride(a)}] * {b};"
"""


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> SynthesisContext:
    path = tmp_path_factory.mktemp("rules") / "two_rows.rules"
    path.write_text(RULES, encoding="utf-8")
    full = make_context("zen1", extra_rules=[path])
    kernel = full.ruleset.kernel("dot2_rows_f32")
    kept = tuple(
        k for k in full.ruleset.kernels if k is kernel or (k.op, k.accum) != (kernel.op, True)
    )
    return attrs.evolve(full, ruleset=attrs.evolve(full.ruleset, kernels=kept))


def _kernels(impl: Impl) -> set[str]:
    return {n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)}


def test_the_kernel_knows_which_operand_it_strides(ctx: SynthesisContext) -> None:
    assert ctx.ruleset.kernel("dot2_rows_f32").strided == {"a"}
    assert ctx.ruleset.kernel("bcast_fma_f32x8").strided == frozenset()


@pytest.mark.parametrize("layout", ["row_major", "col_major", "packed_rows(2)", "packed_rows(3)"])
def test_rows_read_through_the_stride_match_numpy(
    ctx: SynthesisContext, layout: str, tmp_path: Path
) -> None:
    text = f"func f(a: f32[6, 5] {layout}, x: f32[5]) -> y: f32[6] {{\n    y = matmul(a, x)\n}}\n"
    (func,) = parse_spec_file("<test>", text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    assert "dot2_rows_f32" in _kernels(impl)
    source = lower_to_c("stride", [(prog, impl)], ctx)
    harness.check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)


def test_a_tile_of_packed_blocks_does_not_match(ctx: SynthesisContext) -> None:
    kernel = ctx.ruleset.kernel("dot2_rows_f32")
    l1, f32 = ctx.target.level("L1"), dtype("f32")

    def canonical(name: str, shape: tuple[int, ...]) -> Layout:
        family = layout_by_name(name, len(shape))
        assert family is not None
        canon = family.canonical(shape)
        assert canon is not None
        return canon

    def spec(a_layout: Layout) -> Spec:
        operands = (
            TensorSpec((2, 1), f32, l1, a_layout),
            TensorSpec((1,), f32, l1, canonical("row_major", (1,))),
            TensorSpec((2,), f32, l1, canonical("row_major", (2,))),
        )
        return Spec("matmul/2.1.1", operands, True, ctx.target.max_limits())

    # A layout with a packed block (the rows in blocks of 2 after the columns), as a tile
    # across blocks keeps: its rows are not a fixed stride apart in general.
    spanning = Layout(dims=((0, None), (1, None), (0, 2)), contig=3)
    assert not is_strided(spec(spanning).operands[0])
    assert kernel.match(spec(spanning), layout_named) is None
    assert kernel.match(spec(canonical("row_major", (2, 1))), layout_named) is not None
