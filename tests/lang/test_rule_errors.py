"""Rule files that are wrong: every message, exactly, with its place.

Each row is (source, the exact first line of the message). ``{path}`` stands for the file the
source is written to. Syntax and single-file checks come from ``parse_rule_file``; checks that
need the target (levels, cost coefficients, ops declared elsewhere) from assembling a rule set
with the file as an extra rule file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.context import SynthesisContext, make_context
from morello.errors import RuleError, RuleSyntaxError
from morello.lang import parse_rule_file

_K = "kernel k:\n    c: f32[1, 1] @RF = zero()\n    cost scalar_op\n"


def _kernel(pattern: str, cost: str = "scalar_op", template: str = '"{c} = 0;"') -> str:
    return f"kernel k9:\n    {pattern}\n    cost {cost}\n    c {template}\n"


SYNTAX_ERRORS = [
    (
        "kernal k:\n",
        "{path}:1:1: error: expected one of 'include', 'kernel', 'op', 'requires', 'rewrite' "
        "or end of file, found 'kernal'",
    ),
    (
        "kernel k\n    c: f32[1, 1] @RF = zero()\n",
        "{path}:2:5: error: expected one of ',' or ':', found 'c'",
    ),
    (
        "op relu(x[i, j]) y[i, j] = max(x[i, j], 0)\n",
        "{path}:1:18: error: expected '->', found 'y'",
    ),
    (
        "op relu(x[i, j]) -> y[i, j] = max(x[i, j], 0\n",
        "{path}:1:45: error: expected one of ')' or ',', found end of file",
    ),
    (
        "rewrite tile_out for\n",
        "{path}:1:21: error: expected one of '*', 'accum' or a name, found end of file",
    ),
    (
        "rewrite t: matmul(a, b) -> c => { c = zero(); c += matmul(a, b)\n",
        "{path}:1:64: error: expected one of ';' or '}', found end of file",
    ),
    (_K + "    c {c} = 0;\n", "{path}:4:7: error: expected a string, found '{'"),
    (_K, "{path}:3:19: error: expected one of '*', '+', '/' or 'c', found end of file"),
    (
        'kernel k:\n    c: f32[1, 1] @RF = zero()\n    c "{c} = 0;"\n',
        "{path}:3:5: error: expected one of 'cost', 'scratch', 'where' or '|', found 'c'",
    ),
    (_kernel("c: f33[1, 1] @RF = zero()"), "{path}:2:8: error: expected a dtype, found 'f33'"),
    (
        _kernel("c: f32[1, 1] @1 = zero()"),
        "{path}:2:19: error: expected a memory level, found '1'",
    ),
    (
        _kernel("c: f32[1 1] @RF = zero()"),
        "{path}:2:14: error: expected one of ',' or ']', found '1'",
    ),
    (
        _kernel("c: f32[1, 1] @RF := zero()"),
        "{path}:2:22: error: expected one of '+=', '=', '@', '|', a layout or a vector size, "
        "found ':'",
    ),
    ("requires\n", "{path}:1:9: error: expected a name, found end of file"),
    ("include immintrin.h\n", "{path}:1:9: error: expected a header name, found 'immintrin'"),
    (
        _K + '    c "{c} = 0;\n',
        "{path}:4:7: error: expected a string, found an unterminated string",
    ),
]

CHECK_ERRORS = [
    (
        "kernel k, k1, k2:\n    c: f32[1, 1] @RF = zero()\n  | c: f32[1] @RF = zero()\n"
        '    cost scalar_op\n    c "{c} = 0;"\n',
        "{path}:1:1: error: kernel k, k1, k2: 3 name(s) but 2 pattern(s); each pattern needs a "
        "name, in order",
    ),
    (
        # A template is checked against every pattern it serves: `a` is in the first only.
        "kernel k, k1:\n    c: f32[1, 1] @RF = relu(a: f32[1, 1] @RF)\n"
        "  | c: f32[1] @RF = zero()\n"
        '    cost scalar_op\n    c "{c} = {a};"\n',
        "{path}:5:14: error: kernel k1: unknown placeholder {a} (operands: c)",
    ),
    (
        "op m3(a[i], b[i], c[i]) -> y[i] = max(a[i], b[i], c[i])\n",
        "{path}:1:35: error: max takes 2 arguments, found 3",
    ),
    (
        _K + '    c "{c} = {a.__class__};"\n',
        "{path}:4:14: error: kernel k: invalid placeholder {a.__class__}; "
        "templates allow only {x}, {&x} and {stride(x)} for an operand x, "
        "{n} and {mask(n)} for a dim variable n",
    ),
    (
        _K + '    c "{c} = {0};"\n',
        "{path}:4:14: error: kernel k: invalid placeholder {0}; "
        "templates allow only {x}, {&x} and {stride(x)} for an operand x, "
        "{n} and {mask(n)} for a dim variable n",
    ),
    (
        _K + '    c "{c} = {stride(q)};"\n',
        "{path}:4:14: error: kernel k: {stride(q)} names 'q', which is not an operand "
        "(operands: c)",
    ),
    (
        _K + '    c "{c} = {zz};"\n',
        "{path}:4:14: error: kernel k: unknown placeholder {zz} (operands: c)",
    ),
    (
        _K + '    c "/* \\"x\\" */ {&zz};"\n',
        "{path}:4:20: error: kernel k: unknown placeholder {&zz} (operands: c)",
    ),
    (
        "op relu(x[i, j]) -> y[i, j] = max(z[i, j], 0)\n",
        "{path}:1:35: error: op relu: unknown tensor 'z' (inputs: x)",
    ),
    (
        "op zz() -> y[i, j] = x[i, j]\n",
        "{path}:1:22: error: op zz: unknown tensor 'x' (it has no inputs)",
    ),
    (
        "op relu(x[i, j]) -> y[i, j] = max(x[i], 0)\n",
        "{path}:1:35: error: op relu: x has rank 2 but is used with 1 index",
    ),
    (
        "op relu(x[i, j]) -> y[i, j] = maxx(x[i, j], 0)\n",
        "{path}:1:31: error: unknown function 'maxx' (known: exp, max, min)",
    ),
    (
        "op relu(x[i, j]) -> y[i, j] = max(x[i, j])\n",
        "{path}:1:31: error: max takes 2 arguments, found 1",
    ),
    (
        "op s(x[i, j]) -> y[i] = x[i, j]\n",
        "{path}:1:25: error: op s: index 'j' is not in the output and not summed",
    ),
    (
        "op f(x[i, j]) -> y[i, j] = x[i, z]\n",
        "{path}:1:28: error: op f: index 'z' is not declared by any operand",
    ),
    (
        "op f(x[i, j], x[j, i]) -> y[i, j] = x[i, j]\n",
        "{path}:1:15: error: op f: operand 'x' is declared twice",
    ),
    (
        "rewrite tile_outt for * sizes pow2\n",
        "{path}:1:9: error: unknown rewrite schema 'tile_outt' (did you mean 'tile_out'?)",
    ),
    (
        "rewrite fuse for * sizes pow2\n",
        "{path}:1:9: error: unknown rewrite schema 'fuse' "
        "(known: tile_out, split, split_init, move, pipeline, split_fuse, parallel_tile_out, "
        "reside)",
    ),
    (
        "rewrite tile_out for * sizes odd\n",
        "{path}:1:24: error: unknown size policy 'odd' "
        "(known: pow2, pow2_from64, pow2_half, pow2_3, pow2x7, all)",
    ),
    (
        "rewrite t: matmul(a, b) -> c => { c = zero(); c += matmul(a, q) }\n",
        "{path}:1:62: error: rewrite t: unknown tensor 'q' (the pattern names a, b, c)",
    ),
    (
        _kernel("c: f32[1, 1] @RF += matmul(c: f32[1, 1] @RF, b: f32[1, 1] @RF)"),
        "{path}:2:5: error: kernel k9: operand 'c' is declared twice",
    ),
]

# An op whose reduction is inside its expression: it has no accumulating form.
_NORM = "op norm(x[i, j], z[i, k]) -> y[i, j] = x[i, j] / (sum(k) z[i, k])\n"

# Checks made when a target assembles its rule set; {target}, {levels} and {coefficients}
# stand for the target under test's name, sorted level names and coefficient names.
_ROLES = "roles: memory, cache, registers, vector_registers"

RULE_SET_ERRORS = [
    (
        _kernel("c: f32[1, 1] @registers = zero()\n    scratch 2 L0"),
        "{path}:1:1: error: kernel k9: scratch in unknown memory level 'L0' "
        "(target {target} has {levels}; " + _ROLES + ")",
    ),
    (
        _kernel("c: f32[1, 1] @registers|L0 = zero()"),
        "{path}:1:1: error: kernel k9: unknown memory level 'L0' "
        "(target {target} has {levels}; " + _ROLES + ")",
    ),
    (
        _kernel("c: f32[1, 1] @rf = zero()"),
        "{path}:1:1: error: kernel k9: unknown memory level 'rf' "
        "(target {target} has {levels}; " + _ROLES + ")",
    ),
    (
        _kernel("c: f32[1, 1] @registers = zero()", cost="2 * zap"),
        "{path}:1:1: error: kernel k9: unknown cost coefficient 'zap' "
        "(target {target} defines {coefficients})",
    ),
    (
        _kernel("c: f32[1, 1] @registers = zerox()"),
        "{path}:1:1: error: kernel k9: unknown op 'zerox'",
    ),
    (
        _kernel("c: f32[1] @RF = exp_shifted(x: f32[1, 1] @RF, m: f32[1] @RF)"),
        "{path}:1:1: error: kernel k9: operand c has rank 1, exp_shifted expects 2",
    ),
    (
        _kernel("c: f32[1] @registers += matmul(a: f32[1, 1] @registers, b: f32[1, 1] @registers)"),
        "{path}:1:1: error: kernel k9: no form of matmul has operand ranks (2, 2) -> 1 "
        "(forms: (2, 2) -> 2, (1, 2) -> 1, (2, 1) -> 1, (1, 1) -> 0)",
    ),
    (
        _kernel("c: f32[1, 1, 1] @registers = zero()"),
        "{path}:1:1: error: kernel k9: no form of zero has operand ranks () -> 3 "
        "(forms: () -> 2, () -> 1, () -> 0)",
    ),
    (
        _kernel("c: f32[1, 1] @registers diag = zero()"),
        "{path}:1:1: error: kernel k9: unknown layout 'diag'",
    ),
    (
        _kernel("c: f32[1, 1] @registers = zero()") * 2,
        "{path}:5:1: error: kernel 'k9' is declared twice",
    ),
    (
        "op matmul(a[m, k], b[k, n]) -> c[m, n] = sum(k) a[m, k] * b[k, n]\n",
        "{path}:1:1: error: op 'matmul' is declared twice with operands of the same ranks "
        "(an overload needs other ranks or another number)",
    ),
    ("rewrite tile_out for gelu\n", "{path}:1:1: error: rewrite tile_out: unknown op 'gelu'"),
    (
        _NORM + "rewrite split for norm\n",
        "{path}:2:1: error: rewrite split: norm has no accumulating form (a reduction inside its "
        "expression), so it cannot accumulate or be split along a reduction",
    ),
    (
        _NORM + "rewrite r: norm(x, z) -> y => { y = zero(); y += norm(x, z) }\n",
        "{path}:2:1: error: rewrite r: norm has no accumulating form (a reduction inside its "
        "expression), so it cannot accumulate or be split along a reduction",
    ),
    (
        _NORM
        + _kernel(
            "y: f32[1, 1] @registers += norm(x: f32[1, 1] @registers, z: f32[1, 1] @registers)",
            template='"{y} = {x};"',
        ),
        "{path}:2:1: error: kernel k9: norm has no accumulating form (a reduction inside its "
        "expression), so it cannot accumulate or be split along a reduction",
    ),
    # Decompositions are evaluated against the op's index notation (with NumPy).
    (
        "op twice(a[i, j]) -> c[i, j] = a[i, j] * 2\nrewrite r: twice(a) -> c => { c = relu(a) }\n",
        "{path}:2:1: error: rewrite r: its stages do not compute twice: on standard normal "
        "inputs (i=2, j=3) they give 0.12573 at [0, 0], where twice gives 0.25146",
    ),
    (  # the output read before it is written
        "rewrite r: matmul(a, b) -> c => { c += matmul(a, b) }\n",
        "{path}:1:1: error: rewrite r: its stages do not compute matmul: on standard normal "
        "inputs (m=2, n=3, k=4) they give nan at [0, 0], where matmul gives -0.92503",
    ),
    (  # a maximum from 0: wrong only for rows of negative values
        "rewrite r: max(a) -> c => { c = zero(); c += max(a) }\n",
        "{path}:1:1: error: rewrite r: its stages do not compute max: on standard normal "
        "inputs (i=2, j=3, shifted by -4) they give 0 at [0], where max gives -3.35958",
    ),
    (
        "rewrite r: softmax(x) -> y => { m = max(x); e = exp_shifted(x, m); s = sum(e); "
        "y = mul_rows(e, s) }\n",
        "{path}:1:1: error: rewrite r: its stages do not compute softmax: on standard normal "
        "inputs (i=2, j=3) they give 1.23095 at [0, 0], where softmax gives 0.290204",
    ),
]


def _ids(table: list[tuple[str, str]]) -> list[str]:
    return [expected.split("error: ", 1)[1][:48] for _, expected in table]


def _write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "bad.rules"
    path.write_text(source, encoding="utf-8")
    return path


@pytest.mark.parametrize(("source", "expected"), SYNTAX_ERRORS, ids=_ids(SYNTAX_ERRORS))
def test_rule_syntax_error_message(tmp_path: Path, source: str, expected: str) -> None:
    path = _write(tmp_path, source)
    with pytest.raises(RuleSyntaxError) as info:
        parse_rule_file(path)
    assert info.value.format().splitlines()[0] == expected.replace("{path}", str(path))


@pytest.mark.parametrize(("source", "expected"), CHECK_ERRORS, ids=_ids(CHECK_ERRORS))
def test_rule_check_error_message(tmp_path: Path, source: str, expected: str) -> None:
    path = _write(tmp_path, source)
    with pytest.raises(RuleError) as info:
        parse_rule_file(path)
    assert info.value.format().splitlines()[0] == expected.replace("{path}", str(path))


@pytest.mark.parametrize(("source", "expected"), RULE_SET_ERRORS, ids=_ids(RULE_SET_ERRORS))
def test_rule_set_error_message(
    tmp_path: Path, ctx: SynthesisContext, source: str, expected: str
) -> None:
    path = _write(tmp_path, source)
    with pytest.raises(RuleError) as info:
        make_context(ctx.target.name, extra_rules=[path])
    want = (
        expected.replace("{path}", str(path))
        .replace("{target}", ctx.target.name)
        .replace("{levels}", ", ".join(sorted(lv.name for lv in ctx.target.levels)))
        .replace("{coefficients}", ", ".join(ctx.coefficients.named))
    )
    assert info.value.format().splitlines()[0] == want


def test_rule_template_error_caret_points_at_placeholder(tmp_path: Path) -> None:
    path = _write(tmp_path, _K + '    c "{c} = {a.__class__};"\n')
    with pytest.raises(RuleError) as info:
        parse_rule_file(path)
    assert info.value.format().splitlines()[1:] == [
        '        c "{c} = {a.__class__};"',
        "                 ^",
    ]


def test_rule_template_braces_with_spaces_pass(tmp_path: Path) -> None:
    path = _write(tmp_path, _K + '    c "{c} = (float){ 0 };" "if (1) { }" "\\"{}\\""\n')
    (kernel,) = parse_rule_file(path).kernels
    assert kernel.c_lines == ("{c} = (float){ 0 };", "if (1) { }", '"{}"')


def test_rule_unreadable_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "missing.rules"
    with pytest.raises(RuleError) as info:
        parse_rule_file(path)
    assert info.value.loc is None
    assert info.value.format() == (
        f"morello: error: cannot read rule file {path}: no such file or directory"
    )


def test_a_decomposition_that_computes_its_op_loads(tmp_path: Path, ctx: SynthesisContext) -> None:
    path = _write(
        tmp_path,
        "op clamp0(a[i, j]) -> c[i, j] = max(a[i, j], 0)\n"
        "rewrite r: clamp0(a) -> c => { c = relu(a) }\n"
        "rewrite r2: max(a) -> c => { c = lowest(); c += max(a) }\n",
    )
    names = [r.name for r in make_context(ctx.target.name, extra_rules=[path]).ruleset.rules]
    assert "r" in names and "r2" in names
