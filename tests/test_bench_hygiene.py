"""Every benchmark cleans up after itself and runs from a clean clone (issue 23).

Static checks over bench/: a benchmark that makes a temporary directory
removes it, writes nothing into the repository, and imports only the project,
its declared dependencies and the standard library.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = sorted((ROOT / "bench").glob("*.py"))


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def test_a_benchmark_that_makes_a_temporary_directory_removes_it() -> None:
    for path in BENCH:
        calls = _calls(ast.parse(path.read_text()))
        if "mkdtemp" in calls:
            assert "rmtree" in calls, f"{path.name} makes a temporary directory and never removes it"


def test_no_benchmark_writes_a_data_directory_into_the_checkout() -> None:
    for path in BENCH:
        text = path.read_text()
        assert '".feedfabric"' not in text and "'.feedfabric'" not in text, path.name


def test_benchmarks_import_only_what_a_clean_clone_installs() -> None:
    """`make bench` on a clean clone installs the project's extras and nothing else."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project.get("dependencies", []) + [
        d for ds in project.get("optional-dependencies", {}).values() for d in ds
    ]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("-", "_") for d in declared}
    # The modules each declared distribution installs (graphql-core installs graphql, Pillow PIL, ...).
    importable = {
        module.lower()
        for module, distributions in packages_distributions().items()
        if any(d.lower().replace("-", "_") in names for d in distributions)
    } | {"feedfabric", "bench", "faults", "tests"}
    stdlib = set(sys.stdlib_module_names)
    for path in BENCH:
        # Module level only: an import inside a function serves an optional flag (`--profile` needs pyinstrument).
        for node in ast.parse(path.read_text()).body:
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            for module in modules:
                top = module.split(".")[0]
                assert top in stdlib or top.lower() in importable, f"{path.name} imports {top}, not declared"
