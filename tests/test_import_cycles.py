"""No two modules of the package import each other, directly or round a longer circle.

The layer contracts (pyproject.toml, `lint-imports`) keep folders from importing upwards, but not two
modules of one folder from needing each other: such a circle makes either module impossible to read,
test or move alone, and its import order decides which half sees the other half-built. Imports made
only for annotations count too, and so do imports inside functions (grimp, which import-linter uses,
sees both).
"""

from __future__ import annotations

import grimp


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_circles_are_found() -> None:
    """The search itself: a circle of three and a module beside it."""
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]:
        graph.add_import(importer=importer, imported=imported)
    assert circles(graph) == [["a", "b", "c"]]


def test_no_module_of_the_package_is_in_an_import_circle() -> None:
    graph = grimp.build_graph("feedfabric", exclude_type_checking_imports=False, cache_dir=None)
    assert len(graph.modules) > 100
    assert circles(graph) == []
