"""Parser fuzzing: any text either parses into typed objects or raises a located MorelloError.

Samples come from ``st.text()`` and from the grammars themselves (``from_lark``), both as
drawn and with every token padded by spaces, so that samples also lex as the grammar meant
(a keyword drawn next to a name would otherwise lex as one longer name). The number of
examples comes from the loaded hypothesis profile (see tests/conftest.py).
"""

from __future__ import annotations

import re

import lark
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark.lexer import PatternStr

from morello.context import SynthesisContext
from morello.errors import MorelloError
from morello.lang import RuleFile, SpecFile, parse_rule_file, parse_spec_file
from morello.lang._lark import build_grammar, grammar
from morello.lang.spec_file import Program, build_program

_PATH = "fuzz/sample.lark"
_LOOKAROUND = re.compile(r"\(\?<?[!=][^)]*\)")

# Small pools for the regex terminals: drawing from them is fast, and they hold the names the
# check passes know (ops, levels, layouts, operands) as well as a few they do not.
_POOLS: dict[str, list[str]] = {
    "NAME": [
        *("a", "b", "c", "x", "w", "h", "y", "i", "j", "k", "m", "n", "q"),
        *("matmul", "move", "zero", "relu", "max", "sum", "tile_out", "split", "to_accum"),
        *("scalar_op", "mac", "pow2", "all", "func", "op", "c"),
    ],
    "INT": ["0", "1", "2", "4", "8"],
    "NUMBER": ["0", "1", "0.5"],
    "DTYPE": ["f32", "f64", "bf16", "s8"],
    "LEVEL": ["GL", "L1", "RF", "VRF", "L9"],
    "LAYOUT": ["row_major", "col_major", "contiguous", "diag"],
    "VECSIZE": ["v8", "v4"],
    "STRING": ['"{c} = 0;"', '"{c} += {a} * {b};"', '"{&src}"', '"{zz}"', '"{a.b}"', '"{ 0 }"'],
    "HEADER": ["<immintrin.h>", '"mine.h"'],
    "ASSIGN": ["=", "+="],
    "COMMENT": ["# comment\n"],
    "WS": [" ", "\n", "\t"],
}


def _strategies(name: str, pad: str) -> st.SearchStrategy[str]:
    """Samples of grammar ``name``; every token is wrapped in ``pad``.

    Built, not loaded from the cache folder: ``from_lark`` needs the parser's ``grammar``,
    which a loaded parser lacks (and this runs at collection, before the tests' private
    cache folder is set)."""
    parser = build_grammar(name)
    explicit: dict[str, st.SearchStrategy[str]] = {}
    for term in parser.terminals:
        if term.name in _POOLS:
            strategy = st.sampled_from(_POOLS[term.name])
        elif isinstance(term.pattern, PatternStr):
            strategy = st.just(term.pattern.value)
        else:  # a terminal added to the grammar after this test was written
            regex = _LOOKAROUND.sub("", term.pattern.to_regexp())
            strategy = st.from_regex(regex, fullmatch=True)
        explicit[term.name] = strategy.map(lambda s: f"{pad}{s}{pad}")
    return from_lark(parser, explicit=explicit)


def _spaced(name: str) -> st.SearchStrategy[str]:
    return _strategies(name, " ")


def _raw(name: str) -> st.SearchStrategy[str]:
    return _strategies(name, "")


def _check_spec(text: str) -> SpecFile | None:
    try:
        return parse_spec_file(_PATH, text)
    except MorelloError as exc:
        _assert_located(exc)
        return None


def _check_rules(text: str) -> RuleFile | None:
    try:
        return parse_rule_file("fuzz/sample.rules", text)
    except MorelloError as exc:
        _assert_located(exc)
        return None


def _assert_located(exc: MorelloError) -> None:
    assert exc.loc is not None, exc.message
    assert exc.loc.line >= 1
    assert exc.loc.column >= 1
    assert exc.format().startswith(f"{exc.loc.path}:{exc.loc.line}:{exc.loc.column}: error: ")


@given(st.text())
def test_spec_parser_fuzz_any_text(text: str) -> None:
    _check_spec(text)


@given(st.text())
def test_rule_parser_fuzz_any_text(text: str) -> None:
    _check_rules(text)


@given(st.one_of(_raw("spec.lark"), _spaced("spec.lark")))
def test_spec_parser_fuzz_grammar_samples(text: str) -> None:
    spec_file = _check_spec(text)
    assert spec_file is None or isinstance(spec_file, SpecFile)


@given(st.one_of(_raw("rules.lark"), _spaced("rules.lark")))
def test_rule_parser_fuzz_grammar_samples(text: str) -> None:
    rule_file = _check_rules(text)
    assert rule_file is None or isinstance(rule_file, RuleFile)


@given(_spaced("spec.lark"))
def test_spec_check_fuzz_grammar_samples(ctx: SynthesisContext, text: str) -> None:
    spec_file = _check_spec(text)
    if spec_file is None:
        return
    for func in spec_file.funcs:
        try:
            program = build_program(func, ctx)
        except MorelloError as exc:
            _assert_located(exc)
        else:
            assert isinstance(program, Program)


def test_spaced_samples_lex_as_the_grammar_meant() -> None:
    # The padded strategy exists so that grammar samples get past the lexer; check it does.
    parser = grammar("spec.lark")
    text = " func  f  (  a  :  f32  [  2  ]  )  ->  c  :  f32  [  2  ]  {  c  =  g  (  a  )  } "
    assert isinstance(parser.parse(text), lark.Tree)
