"""Spec files that are wrong: every message, exactly, with its place.

Each row is (source, the exact first line of the message). ``{path}`` stands for the file the
source is written to; ``{levels}`` for the memory levels of the target under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.context import SynthesisContext, make_context
from morello.errors import MorelloError, SpecError, SpecSyntaxError
from morello.lang import parse_spec_file
from morello.lang._lark import _TERMINAL_NAMES, grammar, terminal_description
from morello.lang.spec_file import build_program

_MM = "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n"
_MOVE = "    c = move(a)\n}\n"

SYNTAX_ERRORS = [
    (
        "func f(a: f32[64 64], b: f32[64, 64]) -> c: f32[64, 64] {\n    c = matmul(a, b)\n}\n",
        "{path}:1:18: error: expected one of ',' or ']', found '64'",
    ),
    (
        "func f(a: f32[4, 4], b: f32[4, 4]) c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:1:36: error: expected '->', found 'c'",
    ),
    (
        _MM + "    c = matmul(a, b)\n",
        "{path}:2:21: error: expected one of ';', '}' or a name, found end of file",
    ),
    (
        "func f(a: f33[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:1:11: error: expected a dtype, found 'f33'",
    ),
    ("", "{path}:1:1: error: expected one of 'func' or 'parallel', found end of file"),
    (
        "# only a comment\n",
        "{path}:1:17: error: expected one of 'func' or 'parallel', found end of file",
    ),
    (_MM + "    c = matmul(a, $)\n}\n", "{path}:2:19: error: expected a name, found '$'"),
    (
        "func f(a: f32[4, 4] @9) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:22: error: expected a memory level, found '9'",
    ),
    (
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n}\n",
        "{path}:2:1: error: expected a name, found '}'",
    ),
    (
        "func f(a: f32[4, 4] -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:21: error: expected one of ')', ',', '@', a layout or a vector size, found '->'",
    ),
    (
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n    c = move(a,)\n}\n",
        "{path}:2:16: error: expected a name, found ')'",
    ),
    (
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n    c == move(a)\n}\n",
        "{path}:2:8: error: expected a name, found '='",
    ),
    (
        "func f(a: f32[4,]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:17: error: expected one of '*', a name or an integer, found ']'",
    ),
    (
        "func f(a f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:10: error: expected ':', found 'f32'",
    ),
    (
        "fn f(a: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:1: error: expected one of 'func' or 'parallel', found 'fn'",
    ),
    (
        "parallel f(a: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:10: error: expected 'func', found 'f'",
    ),
    (
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE + "}\n",
        "{path}:4:1: error: expected one of 'func', 'parallel' or end of file, found '}'",
    ),
    (
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n    c = move(a) 'x'\n}\n",
        "{path}:2:17: error: expected one of ')', ',', ';', '}' or a name, found \"'\"",
    ),
    (
        "func f(a: f32[4, 4.5]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:19: error: expected one of ',' or ']', found '.'",
    ),
]

CHECK_ERRORS = [
    (
        _MM + "    c = matmull(a, b)\n}\n",
        "{path}:2:9: error: unknown op 'matmull' (did you mean 'matmul'?)",
    ),
    (
        _MM + "    c = gelu(a)\n}\n",
        "{path}:2:9: error: unknown op 'gelu' (did you mean 'relu'?)",
    ),
    (
        "func f(a: f32[4, 8], b: f32[4, 8]) -> c: f32[4, 8] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:19: error: shape mismatch in matmul(a[m, k], b[k, n]) -> c[m, n]: "
        "k is 8 in a but 4 in b",
    ),
    (
        "func f(x: f32[4, 8], w: f32[8, 4]) -> y: f32[4, 8] {\n    y = matmul(x, w)\n}\n",
        "{path}:2:5: error: shape mismatch in matmul(a[m, k], b[k, n]) -> c[m, n]: "
        "n is 4 in the arguments but 8 in result y",
    ),
    (
        "func f(a: f32[4, 4], b: f64[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:19: error: dtype mismatch in matmul: a is f32 but b is f64",
    ),
    (
        "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f64[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:5: error: dtype mismatch: result c is f64 but matmul gives f32",
    ),
    (_MM + "    c = matmul(a)\n}\n", "{path}:2:9: error: matmul takes 2 arguments (a, b), found 1"),
    (
        # The form is chosen by the arguments' ranks: a vector times a matrix gives a vector.
        "func f(x: f32[4], w: f32[4, 4]) -> y: f32[4, 4] {\n    y = matmul(x, w)\n}\n",
        "{path}:2:5: error: rank mismatch in matmul(a[k], b[k, n]) -> c[n]: "
        "result y has rank 2 but c[n] needs rank 1",
    ),
    (
        "func f(x: f32[4]) -> y: f32[4] {\n    y = softmax(x)\n}\n",
        "{path}:2:17: error: rank mismatch in softmax(x[i, j]) -> y[i, j]: "
        "x has rank 1 but x[i, j] needs rank 2 (a vector may be declared as one row: f32[1, 4])",
    ),
    (
        # An intermediate vector cannot be declared otherwise: no hint.
        "func f(x: f32[3, 5]) -> y: f32[3, 3] {\n    m = max(x)\n    y = softmax(m)\n}\n",
        "{path}:3:17: error: rank mismatch in softmax(x[i, j]) -> y[i, j]: "
        "m has rank 1 but x[i, j] needs rank 2",
    ),
    (
        # A whole vector's sum is a scalar (rank 0).
        "func f(x: f32[4]) -> y: f32[1] {\n    y = sum(x)\n}\n",
        "{path}:2:5: error: rank mismatch in sum(a[i]) -> c[]: "
        "result y has rank 1 but c[] needs rank 0",
    ),
    (
        "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:5: error: rank mismatch in matmul(a[m, k], b[k, n]) -> c[m, n]: "
        "result c has rank 1 but c[m, n] needs rank 2",
    ),
    (
        _MM + "    c = matmul(a, q)\n}\n",
        "{path}:2:19: error: unknown tensor 'q' (not a parameter or an earlier result)",
    ),
    (
        _MM + "    c = a\n}\n",
        "{path}:2:9: error: result 'c' must be assigned an op application, found 'a'",
    ),
    (
        "func f(x: f32[2, 2], w: f32[2, 2], v: f32[2, 2]) -> y: f32[2, 2] {\n"
        "    h = matmul(x, w)\n"
        "    g = matmul(x, v)\n"
        "    y = matmul(h, v)\n"
        "}\n",
        "{path}:3:5: error: 'g' is assigned but never used",
    ),
    (
        "func f(x: f32[4, 8]) -> y: f32[4, 8] {\n"
        "    a = add(x, b)\n"
        "    b = relu(a)\n"
        "    y = relu(b)\n"
        "}\n",
        "{path}:2:16: error: 'b' is read before it is assigned (on line 3): statements run "
        "in order, so a cycle has no value",
    ),
    (
        "func f(x: f32[4, 8]) -> y: f32[4, 8] {\n    t = relu(t)\n    y = relu(t)\n}\n",
        "{path}:2:14: error: 't' reads itself: a statement cannot use its own result",
    ),
    (
        "func f(x: f32[4, 8], w: f32[8, 8], b: f32[4]) -> y: f32[4, 8] {\n"
        "    y = relu(add(matmul(x, w), b))\n"
        "}\n",
        "{path}:2:32: error: shape mismatch in add(a[i, j], b[j]) -> c[i, j]: j is 8 in "
        "matmul(...) but 4 in b",
    ),
    (
        "func f(x: f32[2, 3], w: f32[3, 4], v: f32[5, 2]) -> y: f32[2, 2] {\n"
        "    y = matmul(matmul(x, w), v)\n}\n",
        "{path}:2:30: error: shape mismatch in matmul(a[m, k], b[k, n]) -> c[m, n]: k is 4 in "
        "matmul(...) but 5 in v",
    ),
    (
        "func f(x: f32[2, 2], w: f32[2, 2]) -> y: f32[2, 2] {\n"
        "    y = move(x)\n    y = move(w)\n}\n",
        "{path}:3:5: error: 'y' is assigned more than once",
    ),
    (
        "func f(x: f32[2, 2], w: f32[2, 2]) -> y: f32[2, 2] {\n    x = move(w)\n}\n",
        "{path}:2:5: error: 'x' is a parameter and cannot be assigned",
    ),
    (
        "func f(x: f32[2, 2], x: f32[2, 2]) -> y: f32[2, 2] {\n    y = move(x)\n}\n",
        "{path}:1:22: error: parameter 'x' is declared twice",
    ),
    (
        "func f(x: f32[2, 2]) -> x: f32[2, 2] {\n    x = move(x)\n}\n",
        "{path}:1:25: error: result 'x' has the name of a parameter",
    ),
    (
        "func f(x: f32[2, 2]) -> y: f32[2, 2] {\n    h = move(x)\n}\n",
        "{path}:1:25: error: result 'y' is never assigned",
    ),
    (
        "func f(a: bf16[4, 4], b: bf16[4, 4]) -> c: f64[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:5: error: dtype mismatch: result c is f64 but matmul gives bf16 or f32",
    ),
    (
        "func f(a: bf16[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n",
        "{path}:2:19: error: dtype mismatch in matmul: a is bf16 but b is f32",
    ),
    (
        "func f(a: f32[4, 6] packed_cols(4)) -> c: f32[4, 6] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: layout packed_cols(4) does not fit shape [4, 6]",
    ),
    (
        "func f(a: f32[4, 4] @L9) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: unknown memory level 'L9' (this target has {levels})",
    ),
    (
        "func f(a: f32[4, 4] @cache) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: unknown memory level 'cache' (this target has {levels})",
    ),
    (
        "func f(a: f32[4, 4] @GL|RF) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: a parameter lives in exactly one memory level",
    ),
    (
        "func f(a: f32[4, 4] diag) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: unknown layout 'diag' "
        "(known: row_major, col_major, packed_cols(N), packed_rows(N))",
    ),
    (
        "func f(a: f32[4] packed_cols(4)) -> c: f32[4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: layout packed_cols(4) packs a matrix, but the tensor "
        "has rank 1",
    ),
    (
        "func f(a: f32[4, 4] packed_rows(1)) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: the block of packed_rows(1) must be 2 or more",
    ),
    (
        "func f(a: f32[4, 4] row_major col_major) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: more than one layout given",
    ),
    (
        "func f(a: f32[4, n]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: dimensions must be integers, found 'n'",
    ),
    (
        "func f(a: f32[4, 0]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: dimensions must be positive, found 0",
    ),
    (
        "func int(a: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:1: error: function 'int': a C keyword cannot be a name here",
    ),
    (
        "func f(for: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE.replace("(a)", "(for)"),
        "{path}:1:8: error: parameter 'for': a C keyword cannot be a name here",
    ),
    (
        "func f(a: f32[4, 4]) -> _mm256_max_ps: f32[4, 4] {\n    _mm256_max_ps = move(a)\n}\n",
        "{path}:1:25: error: result '_mm256_max_ps': names beginning with '_' are the C "
        "compiler's (its intrinsics and builtins); choose another",
    ),
    (
        "func new(a: f32[4, 4]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:1: error: function 'new': a C++ keyword cannot name a function (its header "
        "is for C and C++)",
    ),
    (
        # 2^31 elements: one past what the C's int indices reach.
        "func f(a: f32[65536, 32768]) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: at most 2147483647 elements "
        "(the C indexes them with int), found 2147483648",
    ),
    (
        "func f(a: f32[4, 4] v8) -> c: f32[4, 4] {\n" + _MOVE,
        "{path}:1:11: error: parameter a: vector sizes are chosen by the synthesizer, not written",
    ),
    (
        "func f(x: f32[2, 2]) -> y: f32[2, 2] {\n    y = move(zero())\n}\n",
        "{path}:2:14: error: zero: cannot infer the size of i, j here; "
        "assign it to the declared result",
    ),
]


def _write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "bad.lark"
    path.write_text(source, encoding="utf-8")
    return path


def _ids(table: list[tuple[str, str]]) -> list[str]:
    return [expected.split("error: ", 1)[1][:48] for _, expected in table]


@pytest.mark.parametrize(("source", "expected"), SYNTAX_ERRORS, ids=_ids(SYNTAX_ERRORS))
def test_spec_syntax_error_message(tmp_path: Path, source: str, expected: str) -> None:
    path = _write(tmp_path, source)
    with pytest.raises(SpecSyntaxError) as info:
        parse_spec_file(path)
    assert info.value.format().splitlines()[0] == expected.replace("{path}", str(path))
    assert info.value.loc is not None


@pytest.mark.parametrize(("source", "expected"), CHECK_ERRORS, ids=_ids(CHECK_ERRORS))
def test_spec_check_error_message(
    tmp_path: Path, ctx: SynthesisContext, source: str, expected: str
) -> None:
    path = _write(tmp_path, source)
    (func,) = parse_spec_file(path).funcs
    with pytest.raises(SpecError) as info:
        build_program(func, ctx)
    levels = ", ".join(lv.name for lv in ctx.target.levels)
    want = expected.replace("{path}", str(path)).replace("{levels}", levels)
    assert info.value.format().splitlines()[0] == want


def test_spec_syntax_error_shows_source_line_and_caret(tmp_path: Path) -> None:
    path = _write(tmp_path, "func f(a: f32[512 x 512]) -> c: f32[512, 512] {\n    c = move(a)\n}\n")
    with pytest.raises(SpecSyntaxError) as info:
        parse_spec_file(path)
    assert info.value.format() == (
        f"{path}:1:19: error: expected one of ',' or ']', found 'x'\n"
        "    func f(a: f32[512 x 512]) -> c: f32[512, 512] {\n"
        "                      ^"
    )


def test_spec_error_caret_counts_tabs_like_the_source_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n\tc = move($)\n}\n")
    with pytest.raises(SpecSyntaxError) as info:
        parse_spec_file(path)
    assert info.value.format().splitlines()[1:] == ["        c = move($)", "                 ^"]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p, "no such file or directory"),
        (lambda p: (p.mkdir(), p)[1], "is a directory"),
        (lambda p: (p.write_bytes(b"func \xff"), p)[1], "not UTF-8 text (byte 5)"),
    ],
    ids=["missing", "directory", "not-utf8"],
)
def test_spec_unreadable_file_is_one_line(tmp_path: Path, make: object, reason: str) -> None:
    path = tmp_path / "spec.lark"
    make(path)  # type: ignore[operator]
    with pytest.raises(SpecError) as info:
        parse_spec_file(path)
    assert info.value.loc is None
    assert info.value.format() == f"morello: error: cannot read spec file {path}: {reason}"


@pytest.mark.parametrize("grammar_name", ["spec.lark", "rules.lark"])
def test_every_terminal_has_a_readable_name(grammar_name: str) -> None:
    parser = grammar(grammar_name)
    for term in parser.terminals:
        description = terminal_description(parser, term.name)
        assert term.name in _TERMINAL_NAMES or description.startswith(("'", '"')), term.name


def test_errors_are_morello_errors_with_places(tmp_path: Path) -> None:
    path = _write(tmp_path, "func")
    with pytest.raises(MorelloError) as info:
        parse_spec_file(path)
    assert info.value.loc is not None
    assert str(info.value) == f"{path}:1:5: error: expected a name, found end of file"


def test_a_vector_where_a_matrix_column_fits_gets_the_column_hint(tmp_path: Path) -> None:
    # An op with a matrix-only form whose second operand's rows are bound by the first's
    # columns: the vector fits as one column (the core matmul now takes vectors itself).
    rules = tmp_path / "mm.rules"
    rules.write_text("op mm(a[m, k], b[k, n]) -> c[m, n] = sum(k) a[m, k] * b[k, n]\n")
    path = _write(tmp_path, "func f(x: f32[3, 5], w: bf16[5]) -> y: f32[3, 1] {\n"
                            "    y = mm(x, w)\n}\n")  # fmt: skip
    (func,) = parse_spec_file(path).funcs
    with pytest.raises(SpecError) as info:
        build_program(func, make_context("zen1", extra_rules=[rules]), require_kernels=False)
    assert info.value.format().splitlines()[0] == (
        f"{path}:2:15: error: rank mismatch in mm(a[m, k], b[k, n]) -> c[m, n]: "
        "w has rank 1 but b[k, n] needs rank 2 (a vector may be declared as one column: "
        "bf16[5, 1])"
    )


def test_an_op_with_no_kernel_on_the_target_is_a_located_error(tmp_path: Path) -> None:
    rules = tmp_path / "softplus.rules"
    rules.write_text("op softplus(a[i, j]) -> c[i, j] = exp(a[i, j]) + 1\n", encoding="utf-8")
    path = _write(tmp_path, "func f(x: f32[4, 8]) -> y: f32[4, 8] {\n    y = softplus(x)\n}\n")
    (func,) = parse_spec_file(path).funcs
    with pytest.raises(SpecError) as info:
        build_program(func, make_context("zen1", extra_rules=[rules]))
    assert info.value.format().splitlines()[0] == (
        f"{path}:2:9: error: softplus has no kernel on target zen1, and no rewrite "
        "decomposes it into ops that have"
    )


def test_an_op_with_no_kernel_for_its_dtypes_is_a_located_error(
    tmp_path: Path, ctx: SynthesisContext
) -> None:
    # relu has kernels, but none of bf16; before the dtype check this stopped in synthesis
    # with "no implementation" and no place.
    path = _write(tmp_path, "func f(x: bf16[4, 8]) -> y: bf16[4, 8] {\n    y = relu(x)\n}\n")
    (func,) = parse_spec_file(path).funcs
    with pytest.raises(SpecError) as info:
        build_program(func, ctx)
    assert info.value.format().splitlines()[0] == (
        f"{path}:2:9: error: relu of bf16 into bf16 has no kernel on target {ctx.target.name}, "
        "and no rewrite decomposes it into ops that have"
    )


def test_an_op_with_kernels_for_its_dtypes_builds(ctx: SynthesisContext) -> None:
    text = "func f(x: bf16[1, 64], w: bf16[64, 16]) -> y: f32[1, 16] {\n    y = matmul(x, w)\n}\n"
    (func,) = parse_spec_file("bf16.lark", text).funcs
    assert build_program(func, ctx).spec.output.dtype.name == "f32"
    assert ctx.ruleset.implementable("matmul", ("bf16", "bf16", "f32"))
    assert not ctx.ruleset.implementable("matmul", ("bf16", "bf16", "bf16"))


def test_spec_function_defined_twice_is_located(tmp_path: Path) -> None:
    # Two C functions of one name would not compile; the second definition is named.
    one = "func f(a: f32[2, 2]) -> y: f32[2, 2] {\n    y = relu(a)\n}\n"
    other = "func g(a: f32[2, 2]) -> y: f32[2, 2] {\n    y = relu(a)\n}\n"
    path = _write(tmp_path, one + other + one)
    with pytest.raises(SpecError) as info:
        parse_spec_file(path)
    assert info.value.format().splitlines()[0] == (
        f"{path}:7:1: error: function f is defined twice (first at line 1)"
    )
    assert [f.name for f in parse_spec_file(_write(tmp_path, one + other)).funcs] == ["f", "g"]
