"""Grammar loading and Lark error translation.

Grammars are package data of ``morello_grammars``; they are found only through
``importlib.resources`` so an installed copy works outside the checkout. A built parser is
kept in the user's cache folder (``morello.cache``), keyed by the text of every grammar file,
the options and Lark's version, so later runs load it instead of building it.

Every syntax error reads ``expected <what>, found <what>``. Expected tokens are named through
``_TERMINAL_NAMES`` (regex terminals: "a name", "an integer", ...) or shown quoted (literal
terminals such as ``'->'`` and keywords such as ``'func'``); a test checks that every terminal
of every grammar has a readable name.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

import lark
from lark.lexer import PatternStr

from morello.cache import entry_key, entry_path, read_entry, write_entry
from morello.errors import MorelloError, SourceError, SourceLocation, read_failure

_GRAMMAR_PACKAGE: Final = "morello_grammars"

# Readable names for the regex terminals; literal terminals are shown quoted.
_TERMINAL_NAMES: Final[dict[str, str]] = {
    "NAME": "a name",
    "INT": "an integer",
    "NUMBER": "a number",
    "DTYPE": "a dtype",
    "LEVEL": "a memory level",
    "LAYOUT": "a layout",
    "VECSIZE": "a vector size",
    "STRING": "a string",
    "HEADER": "a header name",
    "WS": "whitespace",
    "COMMENT": "a comment",
    "$END": "end of file",
}

# Regex terminals that stand for a few literals, listed one by one.
_TERMINAL_LITERALS: Final[dict[str, tuple[str, ...]]] = {
    "ASSIGN": ("'='", "'+='"),
}

# Past this many alternatives an expected-token list is cut short with "...".
_MAX_EXPECTED: Final = 6


_OPTIONS: Final = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": False}


@functools.cache
def grammar(name: str) -> lark.Lark:
    """The LALR parser for grammar file ``name`` (e.g. ``spec.lark``), loaded once: from the
    cache folder when it holds one built from the same grammar files, else built (and kept).
    A loaded parser parses, and names its terminals, like a built one, but has no ``grammar``
    attribute (``build_grammar`` gives one that has)."""
    path = entry_path("grammars", name)
    key = _grammar_key(name)
    data = read_entry(path, key)
    if isinstance(data, bytes):
        try:
            return lark.Lark.load(io.BytesIO(data))
        except Exception:  # damaged, or of another Lark: build it again
            pass
    parser = build_grammar(name)
    buf = io.BytesIO()
    parser.save(buf)
    write_entry(path, key, buf.getvalue())
    return parser


def build_grammar(name: str) -> lark.Lark:
    """The LALR parser for grammar file ``name``, built from the grammar (no cache)."""
    return lark.Lark.open_from_package(_GRAMMAR_PACKAGE, name, ("",), **_OPTIONS)


def _grammar_key(name: str) -> str:
    # Every grammar file, since one imports rules from another (%import .tensors).
    texts = sorted(
        (node.name, node.read_bytes())
        for node in files(_GRAMMAR_PACKAGE).iterdir()
        if node.name.endswith(".lark")
    )
    parts = [f"{n}\0".encode() + t for n, t in texts]
    return entry_key(name, repr(sorted(_OPTIONS.items())), lark.__version__, *parts)


def terminal_description(parser: lark.Lark, name: str) -> str:
    """How an expected-token list names terminal ``name``: a phrase, or the literal quoted."""
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    if name in _TERMINAL_LITERALS:
        return " or ".join(_TERMINAL_LITERALS[name])
    for term in parser.terminals:
        if term.name == name and isinstance(term.pattern, PatternStr):
            return _quote(term.pattern.value)
    return name.lower()


def _quote(text: str) -> str:
    return f"'{text}'" if "'" not in text else f'"{text}"'


def _sort_key(word: str) -> tuple[int, str]:
    # Quoted literals first, then phrases, then "end of file".
    if word == "end of file":
        return (2, word)
    return (0 if word[0] in "'\"" else 1, word)


def describe_expected(parser: lark.Lark, names: Iterable[str]) -> str:
    """``'a'``, ``one of 'a' or a name``, or ``one of 'a', 'b', ... or ...``: short and sorted."""
    found: set[str] = set()
    for n in names:
        found.update(_TERMINAL_LITERALS.get(n, (terminal_description(parser, n),)))
    words = sorted(found, key=_sort_key)
    if not words:
        return "nothing more"
    if len(words) == 1:
        return words[0]
    if len(words) <= _MAX_EXPECTED:
        return "one of " + ", ".join(words[:-1]) + " or " + words[-1]
    return "one of " + ", ".join(words[: _MAX_EXPECTED - 1]) + ", ..."


def _found(tok: lark.Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return _quote(_shorten(str(tok)))


def _shorten(text: str) -> str:
    return text if len(text) <= 24 else text[:21] + "..."


def parse(
    grammar_name: str, text: str, path: str, error_cls: type[SourceError]
) -> lark.Tree[lark.Token]:
    """Parse ``text``; syntax errors become ``error_cls`` with file:line:col."""
    parser = grammar(grammar_name)
    try:
        return parser.parse(text)
    except lark.exceptions.UnexpectedToken as exc:
        tok = exc.token
        expected = describe_expected(parser, exc.accepts or exc.expected)
        raise error_cls(
            f"expected {expected}, found {_found(tok)}", _token_loc(path, tok, text)
        ) from None
    except lark.exceptions.UnexpectedCharacters as exc:
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        allowed = set(exc.allowed or ())
        expected = describe_expected(parser, allowed)
        found = _describe_char(ch)
        if ch == '"' and "STRING" in allowed:
            found = "an unterminated string"
        raise error_cls(
            f"expected {expected}, found {found}",
            SourceLocation(path, exc.line, exc.column),
        ) from None
    except lark.exceptions.UnexpectedEOF as exc:  # pragma: no cover - LALR reports $END tokens
        expected = describe_expected(parser, exc.expected)
        raise error_cls(f"expected {expected}, found end of file", _end_loc(path, text)) from None


def _describe_char(ch: str) -> str:
    if ch == "":
        return "end of file"
    if ch == "'":
        return '"\'"'
    if ch.isprintable():
        return f"'{ch}'"
    return f"character U+{ord(ch):04X}"


def _token_loc(path: str, tok: lark.Token, text: str) -> SourceLocation:
    if tok.type != "$END":
        return SourceLocation(path, tok.line or 1, tok.column or 1, tok.end_line, tok.end_column)
    # Lark places end of file on the last token; point just past it.
    if tok.end_line and tok.end_column:
        return SourceLocation(path, tok.end_line, tok.end_column)
    return _end_loc(path, text) if text.strip() else SourceLocation(path, 1, 1)


def _end_loc(path: str, text: str) -> SourceLocation:
    lines = text.rstrip("\n").split("\n")  # count lines as the lexer does: on "\n" only
    return SourceLocation(path, len(lines), len(lines[-1]) + 1)


def loc_of(path: str, item: lark.Tree[lark.Token] | lark.Token) -> SourceLocation:
    """Source location of a parse-tree node or token."""
    if isinstance(item, lark.Token):
        return SourceLocation(
            path, item.line or 1, item.column or 1, item.end_line, item.end_column
        )
    meta = item.meta
    if getattr(meta, "empty", True):
        return SourceLocation(path, 1, 1)
    return SourceLocation(path, meta.line, meta.column, meta.end_line, meta.end_column)


def read_source(node: Traversable | Path | str, what: str, error_cls: type[MorelloError]) -> str:
    """The text of a source file; ``error_cls("cannot read <what> <path>: why")`` if unreadable."""
    path = Path(node) if isinstance(node, str) else node
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error_cls(f"cannot read {what} {node}: {read_failure(exc)}") from None
