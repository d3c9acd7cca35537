"""House rules that keep the layout honest.

The engine (``morello/``) names no target, ISA or intrinsic, comments included; every module
has a docstring and starts its imports with ``from __future__ import annotations``; every
folder of the checkout that holds code or rules ships in the installed package.
"""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "morello"
TARGETS = ROOT / "targets"

# Intrinsic, ISA and target names that may appear only in rules/ and targets/.
FORBIDDEN_IN_ENGINE = re.compile(r"_mm256|_mm512|__m256|immintrin|zen1|avx2|fmadd", re.IGNORECASE)


def _modules(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_architecture_engine_names_no_target_isa_or_intrinsic() -> None:
    hits = []
    for path in _modules(ENGINE):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = FORBIDDEN_IN_ENGINE.search(line)
            if match:
                hits.append(f"{_rel(path)}:{lineno}: {match.group(0)!r} in {line.strip()!r}")
    assert not hits, "the engine must not name a target, ISA or intrinsic:\n" + "\n".join(hits)


@pytest.mark.parametrize("path", _modules(ENGINE, TARGETS), ids=_rel)
def test_architecture_module_has_docstring(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert ast.get_docstring(tree), f"{_rel(path)} has no module docstring"


@pytest.mark.parametrize("path", _modules(ENGINE, TARGETS, ROOT / "tests"), ids=_rel)
def test_architecture_module_imports_future_annotations_first(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    if not imports:
        return
    first = imports[0]
    assert isinstance(first, ast.ImportFrom)
    assert first.module == "__future__"
    assert [alias.name for alias in first.names] == ["annotations"], _rel(path)


def _declared_packages() -> tuple[list[str], dict[str, str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    return setuptools["packages"], setuptools["package-dir"]


def _folders_needing_a_package(folder: Path, pattern: str) -> list[Path]:
    found = {p.parent for p in folder.rglob(pattern) if "__pycache__" not in p.parts}
    return sorted(found)


@pytest.mark.parametrize(
    ("folder", "pattern"),
    [("morello", "*.py"), ("targets", "*.py"), ("rules", "*.rules"), ("grammars", "*.lark")],
)
def test_architecture_every_folder_is_a_listed_package(folder: str, pattern: str) -> None:
    packages, package_dir = _declared_packages()
    import_name = {path: name for name, path in package_dir.items()}[folder]
    missing = []
    for sub in _folders_needing_a_package(ROOT / folder, pattern):
        parts = sub.relative_to(ROOT / folder).parts
        name = ".".join((import_name, *parts))
        if name not in packages:
            missing.append(f"{_rel(sub)} (as {name})")
    assert not missing, "add to [tool.setuptools] packages in pyproject.toml: " + ", ".join(missing)


def _resource_names(node: Traversable, suffix: str, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for child in node.iterdir():
        if child.is_dir():
            out |= _resource_names(child, suffix, f"{prefix}{child.name}/")
        elif child.name.endswith(suffix):
            out.add(prefix + child.name)
    return out


@pytest.mark.parametrize(
    ("folder", "package", "suffix"),
    [
        ("rules", "morello_rules", ".rules"),
        ("grammars", "morello_grammars", ".lark"),
        ("targets", "morello_targets", ".py"),
    ],
)
def test_architecture_installed_package_has_every_data_file(
    folder: str, package: str, suffix: str
) -> None:
    in_checkout = {
        p.relative_to(ROOT / folder).as_posix()
        for p in (ROOT / folder).rglob(f"*{suffix}")
        if "__pycache__" not in p.parts
    }
    installed = _resource_names(files(package), suffix)
    assert in_checkout <= installed, f"not installed from {folder}/: {in_checkout - installed}"


def _runtime_imports(path: Path) -> set[str]:
    """The ``morello.*`` modules ``path`` imports when it is imported (not for type checking
    only, not inside functions)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("morello."):
                out.add(str(sub.module))
    return out


def _module_name(path: Path) -> str:
    return _rel(path).removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def test_architecture_no_import_cycles() -> None:
    graph = {_module_name(p): _runtime_imports(p) for p in _modules(ROOT / "morello")}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(mod: str) -> None:
        state[mod] = 1
        path.append(mod)
        for dep in sorted(graph.get(mod, ())):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod)


@pytest.mark.parametrize(
    ("package", "must_not_import"),
    [("rules", "lang"), ("rules", "context"), ("db", "search"), ("spec", "rules")],
)
def test_architecture_layering(package: str, must_not_import: str) -> None:
    # Rules are data the parsers (lang) produce and the context holds; the memo table serves
    # the search. (Imports for type checking only are allowed.)
    folder = ROOT / "morello" / package
    paths = _modules(folder) if folder.is_dir() else [ROOT / "morello" / f"{package}.py"]
    for p in paths:
        bad = [m for m in _runtime_imports(p) if m.split(".")[1] == must_not_import]
        assert not bad, f"{_rel(p)} imports {bad}"
