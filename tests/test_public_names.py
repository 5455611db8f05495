"""Every module another folder imports from says what it offers, and nothing reaches past that.

A module's `__all__` is its public face: what the folders above it, the tests and the benchmarks may
use. Without it, any helper a module happens to define is part of its interface as soon as a test or a
neighbouring folder imports it, and renaming that helper breaks code nobody knew depended on it. This
test reads the source (no imports run) and fails when:

- a module that another top-level folder of `feedfabric` (or `tests/`, `bench/`, `faults/`) imports from
  has no literal `__all__`;
- such an import, or an attribute read through an imported module (`posts.page(...)`,
  `monkeypatch.setattr(posts, "page", ...)`), names something missing from the target's `__all__`;
- an `__all__` lists a name with a leading underscore (those are private by convention).

A test that replaces a dependency's function where one of our modules looks it up (to count its calls)
names that module's import, not its face: such seams are listed in SEAMS, each with its reason.

Within one folder (`feedfabric/db/`, say) modules may share whatever they like: the folder is the unit
that is laid out in layers (pyproject.toml's import-linter contracts), so the folder is what keeps a face.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "feedfabric"
# Outside the package, these folders are clients of it like any other folder.
CLIENT_FOLDERS = ("tests", "bench", "faults")
# Names a test may reach although they are no module's public face: a dependency's function, imported
# into one of our modules, that the test replaces there to count the calls (monkeypatch acts on the
# name where it is looked up). Each with the test that needs it; nothing in feedfabric may use them.
SEAMS = {
    # tests/schema/test_input_bounds.py: coercion never sees a name longer than any the type knows.
    ("feedfabric.schema.variables", "get_variable_values"),
}


@dataclass(frozen=True)
class Use:
    """One place where a file names a module of the package, or a name in one."""

    source: str
    line: int
    target: str
    name: str | None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def source_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for top in (PACKAGE, *CLIENT_FOLDERS):
        for path in sorted((ROOT / top).rglob("*.py")):
            files[module_name(path)] = path
    return files


def folder(module: str) -> str:
    """The unit that keeps a face: `feedfabric.db` for every module in db/, a root module for itself."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return parts[0]
    if len(parts) == 1:
        return PACKAGE
    return ".".join(parts[:2])


def declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
            ):
                return [e.value for e in value.elts if isinstance(e, ast.Constant)]
            return None
    return None


def dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"], or None for anything that is not a plain chain of names."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return names[::-1]


def uses_in(source: str, tree: ast.Module, modules: set[str]) -> Iterator[Use]:
    # Names bound to a module of the package, per file (aliases do not move between scopes in this code).
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != PACKAGE:
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[PACKAGE] = PACKAGE
                yield Use(source, node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                    yield Use(source, node.lineno, full, None)
                else:
                    yield Use(source, node.lineno, node.module, alias.name)
    for node in ast.walk(tree):
        chain: list[str] | None = None
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "parent", None), ast.Attribute):
            chain = dotted(node)
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and (dotted(node.func) or [""])[-1] == "setattr"
        ):
            head = dotted(node.args[0])
            chain = None if head is None else [*head, node.args[1].value]
        if not chain or chain[0] not in bound:
            continue
        module = bound[chain[0]]
        for part in chain[1:]:
            if f"{module}.{part}" in modules:
                module = f"{module}.{part}"
                continue
            yield Use(source, node.lineno, module, part)
            break


def parsed() -> dict[str, ast.Module]:
    trees: dict[str, ast.Module] = {}
    for module, path in source_files().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child.parent = node  # type: ignore[attr-defined]
        trees[module] = tree
    return trees


def cross_folder_uses(trees: dict[str, ast.Module]) -> Iterator[Use]:
    modules = {m for m in trees if m.split(".")[0] == PACKAGE}
    for source, tree in trees.items():
        for use in uses_in(source, tree, modules):
            if use.target in modules and folder(use.target) != folder(source) and use.target != PACKAGE:
                yield use


def test_modules_used_across_folders_name_their_public_names() -> None:
    trees = parsed()
    faces = {module: declared_all(tree) for module, tree in trees.items()}
    problems: set[str] = set()
    for use in cross_folder_uses(trees):
        face = faces[use.target]
        where = f"{trees_path(use.source)}:{use.line}"
        if face is None:
            problems.add(f"{use.target} has no literal __all__, but {use.source} imports it ({where})")
        elif use.name is not None and use.name not in face and not seam(use):
            problems.add(
                f"{where} uses {use.target}.{use.name}, which is not in that module's __all__"
                + (" (a private name: use the public API instead)" if use.name.startswith("_") else "")
            )
    assert not problems, "\n".join(sorted(problems))


def seam(use: Use) -> bool:
    return (use.target, use.name) in SEAMS and folder(use.source) == "tests"


def test_public_names_are_not_underscored() -> None:
    trees = parsed()
    private = {
        f"{module}: {name}"
        for module, tree in trees.items()
        if module.split(".")[0] == PACKAGE
        for name in declared_all(tree) or []
        if name.startswith("_")
    }
    assert not private, "\n".join(sorted(private))


def trees_path(module: str) -> str:
    return str(source_files()[module].relative_to(ROOT))
