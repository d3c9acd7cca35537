"""Rule files that are right: the built-in files parse into ops, rewrites and kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.lang import RuleFile, parse_rule_file
from morello.lang.rule_sets import builtin_rule_files
from morello.rules.index_notation import Access
from morello.rules.kernels import CostTerm
from morello.rules.rewrites import DecomposeRule, OpPattern, SchemaRule, Stage

MOVE_OPS = [
    "matmul",
    "zero",
    "lowest",
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "relu",
    "exp",
    "sum",
    "softmax",
    "exp_shifted",
    "div_rows",
    "sub_rows",
    "recip",
    "mul_rows",
]


def _builtin(name: str) -> RuleFile:
    (node,) = [n for n in builtin_rule_files() if str(n).endswith(name)]
    return parse_rule_file(str(node), node.read_text(encoding="utf-8"))


@pytest.mark.parametrize("node", builtin_rule_files(), ids=lambda n: n.name)
def test_rule_parse_every_builtin_file(node: object) -> None:
    rule_file = parse_rule_file(str(node))
    assert rule_file.rule_set == Path(str(node)).stem
    assert rule_file.ops or rule_file.rules or rule_file.kernels


def test_rule_parse_core_ops() -> None:
    declared = _builtin("ops/core.rules").ops
    ops = {op.name: op for op in reversed(declared)}  # the first of each name
    assert [op.name for op in declared[:6]] == [*["matmul"] * 4, "zero", "zero"]
    # The dot product of two vectors: a scalar, an output with no indices (rank 0).
    assert declared[3].inputs == (Access("a", ("k",)), Access("b", ("k",)))
    assert declared[3].output == Access("c", ())
    assert {"add", "sub", "mul", "div", "max", "relu", "exp", "sum", "softmax"} <= set(ops)
    matmul = ops["matmul"]
    assert matmul.inputs == (Access("a", ("m", "k")), Access("b", ("k", "n")))
    assert matmul.output == Access("c", ("m", "n"))
    assert matmul.reduction_vars == ("k",)
    assert matmul.loc is not None
    assert (matmul.loc.line, matmul.loc.column) == (8, 1)
    assert ops["zero"].inputs == ()
    assert ops["move"].is_identity


def test_rule_parse_core_rewrites() -> None:
    rules = _builtin("rewrites/core.rules").rules
    assert rules[:4] == (
        SchemaRule("tile_out", (OpPattern("*"),), "pow2_3", ("*",)),
        SchemaRule("split", (OpPattern("*", accum_only=True),), "pow2", ("*",)),
        SchemaRule("split_init", (OpPattern("*"),), "pow2_from64", ("*",), into=("memory",)),
        SchemaRule("move", tuple(map(OpPattern, MOVE_OPS)), "pow2", ("*",)),
    )
    assert rules[4] == SchemaRule(
        "move", (OpPattern("graph"),), "pow2", ("*",), into=("cache",), operands="inputs"
    )
    assert rules[8] == SchemaRule("pipeline", (OpPattern("graph"),), "pow2", ("row_major",))
    to_accum = rules[5]
    assert isinstance(to_accum, DecomposeRule)
    assert (to_accum.name, to_accum.op, to_accum.params, to_accum.output) == (
        "to_accum",
        "matmul",
        ("a", "b"),
        "c",
    )
    assert to_accum.stages == (
        Stage("c", False, "zero", ()),
        Stage("c", True, "matmul", ("a", "b")),
    )


def test_rule_parse_scalar_kernels() -> None:
    rule_file = _builtin("kernels/scalar.rules")
    assert rule_file.requires == ()
    kernels = {k.name: k for k in rule_file.kernels}
    mac = kernels["mac_f32"]
    assert (mac.op, mac.accum, mac.rule_set) == ("matmul", True, "scalar")
    assert [o.name for o in mac.operands] == ["a", "b", "c"]
    assert all(o.levels == ("registers", "cache") for o in mac.operands)  # roles
    assert all(o.dims == (1, 1) and o.dtype == "f32" for o in mac.operands)
    assert mac.cost == (CostTerm(1, ("mac",)),)
    assert mac.c_lines == ("{c} += {a} * {b};",)
    assert not kernels["zero_f32"].accum


def test_rule_parse_vector_kernels_have_requires_and_properties() -> None:
    rule_file = _builtin("kernels/x86_avx2.rules")
    assert rule_file.requires == ("avx2", "fma")
    assert rule_file.includes == ("<immintrin.h>",)
    kernels = {k.name: k for k in rule_file.kernels}
    load = kernels["vload_f32x8"]
    src, dst = load.operands
    assert src.contiguous and src.levels == ("L1",)
    assert dst.vector_size == 8 and dst.levels == ("VRF",)
    assert all(k.requires == ("avx2", "fma") for k in kernels.values())


def test_rule_parse_every_construct(tmp_path: Path) -> None:
    path = tmp_path / "extra.rules"
    path.write_text(
        "# header comment\n"
        "requires sse2\n"
        'include "mine.h"\n'
        "op relu(x[i, j]) -> y[i, j] = max(x[i, j], 0.5) - 1 + 2 * x[i, j]\n"
        "rewrite tile_out for accum matmul, zero sizes all layouts row_major, col_major\n"
        "rewrite t: matmul(a, b) -> c => { c = zero(); c += matmul(a, b); }\n"
        "kernel k_f32:\n"
        "    d: f32[n, 1] @L1 col_major = move(s: f32[n, *] @GL|L1 contiguous)\n"
        "    cost 2 * n * scalar_op + mac\n"
        '    c "for (;;) { }" "{d} = {s}; /* \\"q\\" */"\n',
        encoding="utf-8",
    )
    rule_file = parse_rule_file(path)
    assert rule_file.rule_set == "extra"
    assert rule_file.requires == ("sse2",)
    assert rule_file.includes == ('"mine.h"',)
    (relu,) = rule_file.ops
    assert relu.reduction_vars == ()
    schema, decompose = rule_file.rules
    assert schema == SchemaRule(
        "tile_out",
        (OpPattern("matmul", accum_only=True), OpPattern("zero")),
        "all",
        ("row_major", "col_major"),
    )
    assert isinstance(decompose, DecomposeRule)
    assert len(decompose.stages) == 2
    (kernel,) = rule_file.kernels
    s, d = kernel.operands
    assert s.dims == ("n", "*") and s.levels == ("GL", "L1") and s.contiguous
    assert d.layouts == ("col_major",)
    assert kernel.cost == (CostTerm(2, ("n", "scalar_op")), CostTerm(1, ("mac",)))
    assert kernel.c_lines == ("for (;;) { }", '{d} = {s}; /* "q" */')
    assert kernel.loc is not None and kernel.loc.line == 7


def test_rule_parse_equal_declarations_compare_equal(tmp_path: Path) -> None:
    text = "op zero() -> c[i, j] = 0\n"
    one = parse_rule_file(tmp_path / "a.rules", text)
    two = parse_rule_file(tmp_path / "b.rules", "\n\n" + text)
    assert one.ops == two.ops
