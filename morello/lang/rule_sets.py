"""Finding and reading rule files: the rule set of a target, from the files it enables.

Built-in rule files are package data of ``morello_rules``; a rule file's rule-set name is its
file stem, and a target enables rule sets by name. Extra files (from plugins or ``--rules``)
are always enabled. Each file is parsed here (``rule_file.py``) and the rule set assembled
by ``morello.rules.ruleset``. Knows no rule set by name.

A parsed file is kept in the user's cache folder (``morello.cache``), keyed by its path, its
text, the names it may use and Morello's code, and loaded instead of parsed while they stay
the same. Only files that parse are kept: a wrong one is reported, file:line:col, every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from morello.cache import entry_key, entry_path, read_entry, write_entry
from morello.errors import RuleError
from morello.lang._lark import read_source
from morello.lang.rule_file import parse_rule_file
from morello.rules.ruleset import RuleFile, RuleSet, assemble_rule_set
from morello.rules.schemas import BUILTIN_SCHEMAS, BUILTIN_SIZE_POLICIES
from morello.target import CostCoefficients, Target

_RULES_PACKAGE = "morello_rules"


def builtin_rule_files() -> list[Traversable]:
    """Every ``.rules`` file shipped with the package, sorted by path."""
    out: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".rules"):
                out.append((prefix + child.name, child))

    walk(files(_RULES_PACKAGE), "")
    return [t for _, t in sorted(out, key=lambda p: p[0])]


def expand_rule_paths(
    paths: Iterable[Traversable | Path | str],
) -> list[Traversable | Path]:
    """The rule files ``paths`` name: each file as given, each folder's ``*.rules`` files in
    name order (the paths kernels' and rules' locations then carry)."""
    out: list[Traversable | Path] = []
    for p in paths:
        node = Path(p) if isinstance(p, str) else p
        if node.is_dir():
            found = sorted(
                (c for c in node.iterdir() if c.name.endswith(".rules")), key=lambda c: c.name
            )
            if not found:  # a wrong folder named on purpose would otherwise do nothing
                raise RuleError(f"rule folder {node} holds no .rules files")
            out.extend(found)
        else:
            out.append(node)
    return out


def _read(
    node: Traversable | Path, schemas: tuple[str, ...], size_policies: tuple[str, ...]
) -> RuleFile:
    text = read_source(node, "rule file", RuleError)
    path = str(node)
    entry = entry_path("rules", path)
    key = entry_key(path, text, "\0".join(schemas), "\0".join(size_policies))
    cached = read_entry(entry, key)
    if isinstance(cached, RuleFile):
        return cached
    parsed = parse_rule_file(path, text, schemas, size_policies)
    write_entry(entry, key, parsed)
    return parsed


def load_rule_set(
    target: Target,
    coefficients: CostCoefficients,
    extra: Iterable[Traversable | Path | str] = (),
    schemas: Iterable[str] = BUILTIN_SCHEMAS,
    size_policies: Iterable[str] = BUILTIN_SIZE_POLICIES,
) -> RuleSet:
    """Read the built-in rule files ``target`` enables and the ``extra`` ones, and assemble
    its rule set.

    ``schemas`` and ``size_policies`` are the names rule files may use (the registered ones).

    Raises:
        RuleError: a file is unreadable or wrong, or declarations disagree across files.
    """
    names, policies = tuple(schemas), tuple(size_policies)  # ``schemas`` may map to objects
    chosen: list[RuleFile] = []
    for node in builtin_rule_files():
        stem = node.name[: -len(".rules")]
        if stem in target.rule_sets:
            chosen.append(_read(node, names, policies))
    builtin = {rf.path for rf in chosen}  # evaluated by the test suite, not at each start
    known_sets = {rf.rule_set for rf in chosen}
    missing = [s for s in target.rule_sets if s not in known_sets]
    chosen.extend(_read(node, names, policies) for node in expand_rule_paths(extra))
    if missing and not any(rf.rule_set in missing for rf in chosen):
        raise RuleError(
            f"target {target.name!r} enables rule set(s) {', '.join(missing)} "
            "but no such rule files are installed"
        )
    return assemble_rule_set(target, coefficients, chosen, schemas, trusted=builtin)
