"""Grammar loading and Lark error translation.

Grammars are package data of ``morello_grammars``; they are found only through
``importlib.resources`` so an installed copy works outside the checkout.
"""

from __future__ import annotations

import functools
from typing import Final

import lark
from lark.lexer import PatternStr

from morello.errors import SourceError, SourceLocation

_GRAMMAR_PACKAGE: Final = "morello_grammars"

# Readable names for the regex terminals; string terminals are shown quoted.
_TERMINAL_NAMES: Final[dict[str, str]] = {
    "NAME": "a name",
    "INT": "an integer",
    "NUMBER": "a number",
    "DTYPE": "a dtype",
    "LEVEL": "a memory level",
    "VECSIZE": "a vector size",
    "STRING": "a string",
    "HEADER": "a header name",
    "ASSIGN": "'=' or '+='",
    "$END": "end of file",
}


@functools.cache
def grammar(name: str) -> lark.Lark:
    """The LALR parser for grammar file ``name`` (e.g. ``spec.lark``), loaded once."""
    return lark.Lark.open_from_package(
        _GRAMMAR_PACKAGE,
        name,
        ("",),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
    )


def terminal_description(parser: lark.Lark, name: str) -> str:
    """How an expected-token list names terminal ``name``."""
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    for term in parser.terminals:
        if term.name == name and isinstance(term.pattern, PatternStr):
            return f"'{term.pattern.value}'"
    return name.lower()


def _describe_expected(parser: lark.Lark, names: set[str]) -> str:
    words = sorted({terminal_description(parser, n) for n in names})
    if len(words) == 1:
        return words[0]
    if len(words) <= 6:
        return "one of " + ", ".join(words[:-1]) + " or " + words[-1]
    return "one of " + ", ".join(words[:6]) + ", ..."


def parse(
    grammar_name: str, text: str, path: str, error_cls: type[SourceError]
) -> lark.Tree[lark.Token]:
    """Parse ``text``; syntax errors become ``error_cls`` with file:line:col."""
    parser = grammar(grammar_name)
    try:
        return parser.parse(text)
    except lark.exceptions.UnexpectedToken as exc:
        tok = exc.token
        found = "end of file" if tok.type == "$END" else f"'{tok.value}'"
        expected = _describe_expected(parser, set(exc.accepts or exc.expected))
        line = exc.line if exc.line and exc.line > 0 else _last_line(text)
        col = exc.column if exc.column and exc.column > 0 else 1
        raise error_cls(
            f"expected {expected}, found {found}", SourceLocation(path, line, col)
        ) from None
    except lark.exceptions.UnexpectedCharacters as exc:
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        expected = _describe_expected(parser, set(exc.allowed or ()))
        raise error_cls(
            f"unexpected character {ch!r}; expected {expected}",
            SourceLocation(path, exc.line, exc.column),
        ) from None
    except lark.exceptions.UnexpectedEOF as exc:
        expected = _describe_expected(parser, set(exc.expected))
        raise error_cls(
            f"expected {expected}, found end of file",
            SourceLocation(path, _last_line(text), 1),
        ) from None


def _last_line(text: str) -> int:
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))


def loc_of(path: str, item: lark.Tree[lark.Token] | lark.Token) -> SourceLocation:
    """Source location of a parse-tree node or token."""
    if isinstance(item, lark.Token):
        return SourceLocation(path, item.line or 1, item.column or 1)
    meta = item.meta
    if getattr(meta, "empty", True):
        return SourceLocation(path, 1, 1)
    return SourceLocation(path, meta.line, meta.column, meta.end_line, meta.end_column)
