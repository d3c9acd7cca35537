"""Spec files that are right: they parse into typed functions and check into root Specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.context import SynthesisContext
from morello.lang import parse_spec_file
from morello.lang.spec_file import Call, Param, Var, build_program
from morello.lang.syntax import TensorType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.lark"
    path.write_text(text, encoding="utf-8")
    return path


def test_spec_parse_example_matmul_64() -> None:
    spec_file = parse_spec_file(EXAMPLES / "matmul_64.lark")
    (func,) = spec_file.funcs
    assert func.name == "matmul_64"
    assert not func.parallel
    assert [p.name for p in func.params] == ["a", "b"]
    assert func.params[0].type.dtype == "f32"
    assert func.params[0].type.dims == (64, 64)
    assert func.result.name == "c"
    (stmt,) = func.stmts
    assert stmt.target == "c"
    assert isinstance(stmt.expr, Call)
    assert stmt.expr.op == "matmul"
    assert [a.name for a in stmt.expr.args if isinstance(a, Var)] == ["a", "b"]


def test_spec_parse_layouts_levels_and_parallel(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "# comment line\n"
        "parallel func mm(a: f32[8, 16] @GL, b: f32[16, 4] col_major @GL)"
        " -> c: f32[8, 4] row_major {\n"
        "    c = matmul(a, b);  # trailing comment\n"
        "}\n",
    )
    (func,) = parse_spec_file(path).funcs
    assert func.parallel
    a, b = func.params
    assert a.type.levels == ("GL",)
    assert a.type.props == ()
    assert b.type.props == ("col_major",)
    assert b.type.levels == ("GL",)
    assert func.result.type.props == ("row_major",)
    assert func.loc.path == str(path)
    assert (func.loc.line, func.loc.column) == (2, 1)
    assert (a.loc.line, a.loc.column) == (2, 18)


def test_spec_parse_multi_statement_graph(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "func mlp(x: f32[8, 16], w: f32[16, 16], v: f32[16, 4]) -> y: f32[8, 4] {\n"
        "    h = matmul(x, w)\n"
        "    y = matmul(h, v)\n"
        "}\n",
    )
    (func,) = parse_spec_file(path).funcs
    assert [s.target for s in func.stmts] == ["h", "y"]
    second = func.stmts[1].expr
    assert isinstance(second, Call)
    assert [a.name for a in second.args if isinstance(a, Var)] == ["h", "v"]
    assert (second.loc.line, second.loc.column) == (3, 9)


def test_spec_parse_nested_calls_and_several_funcs(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "func f(a: f32[2, 2]) -> c: f32[2, 2] { c = move(move(a)) }\n"
        "func g(a: f32[2, 2]) -> c: f32[2, 2] { c = zero() }\n",
    )
    f, g = parse_spec_file(path).funcs
    outer = f.stmts[0].expr
    assert isinstance(outer, Call)
    assert isinstance(outer.args[0], Call)
    assert outer.args[0].op == "move"
    zero = g.stmts[0].expr
    assert isinstance(zero, Call)
    assert zero.args == ()


def test_spec_parse_locations_do_not_take_part_in_equality(tmp_path: Path) -> None:
    one = parse_spec_file(
        tmp_path / "a.lark", "func f(a: f32[2, 2]) -> c: f32[2, 2] { c = move(a) }\n"
    )
    two = parse_spec_file(
        tmp_path / "b.lark", "\n\n  func f(a: f32[2, 2])\n -> c: f32[2, 2] {\n c = move(a)\n}\n"
    )
    assert one.funcs == two.funcs
    assert one.funcs[0].loc != two.funcs[0].loc


def test_spec_parse_rule_pattern_dims_are_kept_as_written(tmp_path: Path) -> None:
    (func,) = parse_spec_file(
        tmp_path / "s.lark", "func f(a: f32[n, *] v8) -> c: f32[2, 2] { c = move(a) }\n"
    ).funcs
    param = func.params[0]
    assert isinstance(param, Param)
    assert isinstance(param.type, TensorType)
    assert param.type.dims == ("n", "*")
    assert param.type.vector_size == 8


def test_spec_build_program_makes_root_spec(tmp_path: Path, ctx: SynthesisContext) -> None:
    path = _write(
        tmp_path,
        "parallel func mm(a: f32[8, 16], b: f32[16, 4] col_major) -> c: f32[8, 4] {\n"
        "    c = matmul(a, b)\n"
        "}\n",
    )
    (func,) = parse_spec_file(path).funcs
    program = build_program(func, ctx)
    spec = program.spec
    assert spec.op == "matmul"
    assert not spec.accum
    assert not spec.serial
    assert [t.shape for t in spec.operands] == [(8, 16), (16, 4), (8, 4)]
    assert {t.level for t in spec.operands} == {ctx.target.levels[0]}
    assert [t.layout.describe(2) for t in spec.operands] == ["row_major", "col_major", "row_major"]
    assert program.operand_params == ("a", "b", "c")
    assert [name for name, _ in program.params] == ["a", "b"]


@pytest.mark.parametrize("separator", ["\n", "; ", ";\n"])
def test_spec_parse_statement_separators(tmp_path: Path, separator: str) -> None:
    path = _write(
        tmp_path,
        "func f(x: f32[2, 2], w: f32[2, 2]) -> y: f32[2, 2] {"
        f"h = matmul(x, w){separator}y = move(h)"
        "}\n",
    )
    (func,) = parse_spec_file(path).funcs
    assert [s.target for s in func.stmts] == ["h", "y"]


def test_spec_parse_a_scalar_has_rank_0(tmp_path: Path, ctx: SynthesisContext) -> None:
    path = _write(
        tmp_path,
        "func dot(x: f32[16], y: f32[16]) -> s: f32[] {\n    s = matmul(x, y)\n}\n",
    )
    (func,) = parse_spec_file(path).funcs
    assert func.result.type.dims == ()
    spec = build_program(func, ctx).spec
    assert [t.shape for t in spec.operands] == [(16,), (16,), ()]
    assert spec.op == "matmul/1.1.0"
