"""Parsed grammars and rule files are kept in the cache folder and loaded on the next run.

Each test points ``XDG_CACHE_HOME`` at its own folder. A second load parses nothing; a
changed rule file is parsed again (and only it); a damaged entry, or a cache folder that
cannot be written, costs a parse and nothing else; a wrong rule file is reported, at its
line and column, every time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lark
import pytest

from morello import cache
from morello.context import SynthesisContext, make_context
from morello.errors import RuleSyntaxError, SpecSyntaxError
from morello.lang import _lark, rule_sets

_RULES = "# a made-up op, for the cache tests\nop twice(a[i, j]) -> c[i, j] = a[i, j] + a[i, j]\n"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder; the in-process grammar parsers are dropped before and after."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    _lark.grammar.cache_clear()
    yield home
    _lark.grammar.cache_clear()


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[Any]:
    """Replace ``module.name`` by a wrapper that records its first argument per call."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def _rules(tmp_path: Path, text: str = _RULES) -> Path:
    path = tmp_path / "twice.rules"
    path.write_text(text, encoding="utf-8")
    return path


def _load(target_name: str, extra: Path) -> SynthesisContext:
    return make_context(target_name, extra_rules=[extra])


def test_parse_cache_second_load_parses_nothing(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target_name: str
) -> None:
    extra = _rules(tmp_path)
    parsed = _counting(monkeypatch, rule_sets, "parse_rule_file")
    first = _load(target_name, extra)
    assert str(extra) in parsed and len(parsed) == len(first.ruleset.files)
    assert sorted((cache_home / "morello" / "rules").iterdir())

    parsed.clear()
    second = _load(target_name, extra)
    assert parsed == []
    assert second.ruleset.files == first.ruleset.files
    assert second.ruleset.rules == first.ruleset.rules
    assert second.ruleset.kernels == first.ruleset.kernels
    assert second.ruleset.ops["twice"] == first.ruleset.ops["twice"]


def test_parse_cache_changed_rule_file_is_parsed_again(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target_name: str
) -> None:
    extra = _rules(tmp_path)
    _load(target_name, extra)
    parsed = _counting(monkeypatch, rule_sets, "parse_rule_file")
    extra.write_text(_RULES.replace("a[i, j] + a[i, j]", "a[i, j] * a[i, j]"), encoding="utf-8")
    ctx = _load(target_name, extra)
    assert parsed == [str(extra)]
    assert ctx.ruleset.ops["twice"].expr.op == "*"


def test_parse_cache_rule_errors_are_reported_every_time(
    cache_home: Path, tmp_path: Path, target_name: str
) -> None:
    extra = _rules(tmp_path)
    _load(target_name, extra)  # the good file is cached
    extra.write_text(_RULES + "op broken(a[i]) ->\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(RuleSyntaxError) as info:
            _load(target_name, extra)
        assert info.value.format().startswith(f"{extra}:3:19: error: expected ")
    extra.write_text(_RULES, encoding="utf-8")  # fixed again: the cached parse is good
    assert "twice" in _load(target_name, extra).ruleset.ops


@pytest.mark.parametrize("damage", [b"", b"not a pickle", "truncated"])
def test_parse_cache_damaged_entries_are_rebuilt(
    cache_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target_name: str,
    damage: bytes | str,
) -> None:
    extra = _rules(tmp_path)
    first = _load(target_name, extra)
    entries = sorted((cache_home / "morello").rglob("*.pickle"))
    assert entries
    for entry in entries:
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2] if damage == "truncated" else damage)
    _lark.grammar.cache_clear()
    parsed = _counting(monkeypatch, rule_sets, "parse_rule_file")
    built = _counting(monkeypatch, _lark, "build_grammar")
    second = _load(target_name, extra)
    assert len(parsed) == len(first.ruleset.files)
    assert built == ["rules.lark"]
    assert second.ruleset.rules == first.ruleset.rules
    # ... and the rebuilt entries serve the next load.
    parsed.clear()
    _load(target_name, extra)
    assert parsed == []


def test_parse_cache_unwritable_folder_only_costs_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target_name: str
) -> None:
    not_a_folder = tmp_path / "cache-home"
    not_a_folder.write_text("a file where the cache folder would be\n", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    _lark.grammar.cache_clear()
    try:
        extra = _rules(tmp_path)
        parsed = _counting(monkeypatch, rule_sets, "parse_rule_file")
        first = _load(target_name, extra)
        second = _load(target_name, extra)
        assert len(parsed) == 2 * len(first.ruleset.files)
        assert second.ruleset.rules == first.ruleset.rules
        assert not_a_folder.is_file()
        assert list(tmp_path.glob("**/*.tmp")) == []
    finally:
        _lark.grammar.cache_clear()


_GOOD_SPEC = "func f(a: f32[2, 2]) -> c: f32[2, 2] {\n    c = matmul(a, a)\n}\n"
_BAD_SPECS = [
    "func f(a: f32[2, 2]) -> c: f32[2, 2] {\n    c = matmul(a a)\n}\n",
    "func f(a: f32[2, 2]) -> ",
    "func f(a: f32[2, 2]) -> c: f33[2, 2] {\n}\n",
    'func f(a: f32[2, 2]) -> c: f32[2, 2] {\n    c = "\n}\n',
]


def _spec_errors() -> list[str]:
    out = []
    for text in _BAD_SPECS:
        with pytest.raises(SpecSyntaxError) as info:
            _lark.parse("spec.lark", text, "bad.lark", SpecSyntaxError)
        out.append(info.value.format())
    return out


def test_parse_cache_grammar_is_loaded_not_built(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _counting(monkeypatch, _lark, "build_grammar")
    fresh = _spec_errors()
    assert built == ["spec.lark"]
    _lark.grammar.cache_clear()
    loaded = _spec_errors()
    assert built == ["spec.lark"]  # not built again: loaded from the cache folder
    assert loaded == fresh
    tree = _lark.grammar("spec.lark").parse(_GOOD_SPEC)
    assert isinstance(tree, lark.Tree)
    assert tree == _lark.build_grammar("spec.lark").parse(_GOOD_SPEC)


def test_parse_cache_grammar_entry_of_another_key_is_ignored(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = cache.entry_path("grammars", "spec.lark")
    cache.write_entry(path, "a key made from other grammar files", b"not a parser")
    built = _counting(monkeypatch, _lark, "build_grammar")
    assert _lark.grammar("spec.lark").parse(_GOOD_SPEC)
    assert built == ["spec.lark"]
    # Lark's cache entry with the right key but unusable content: built again too.
    key = _lark._grammar_key("spec.lark")
    cache.write_entry(path, key, b"not a parser")
    _lark.grammar.cache_clear()
    assert _lark.grammar("spec.lark").parse(_GOOD_SPEC)
    assert built == ["spec.lark", "spec.lark"]
