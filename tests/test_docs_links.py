"""The README and docs name only files in the repository: every relative link resolves inside it, and
nothing points at the external contract's files, which a clone does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_resolve_inside_the_repository() -> None:
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (doc.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


def lines_naming(pattern: str) -> list[str]:
    """Where (doc:line) any doc matches the pattern."""
    found = re.compile(pattern)
    return [
        f"{doc.relative_to(ROOT)}:{n}"
        for doc in DOCS
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if found.search(line)
    ]


def test_no_doc_names_the_external_contract_files() -> None:
    assert lines_naming(r"OPERATIONS\.md|shared/contract|\.\./shared") == [], (
        "name docs/api.md or schema.graphql instead"
    )


def test_no_doc_names_a_file_of_one_machine() -> None:
    """A path such as a workspace's lock file is true of the machine it was written on, not of a clone."""
    assert lines_naming(r"(?<![\w.])/(work|home|root|tmp)/") == []
