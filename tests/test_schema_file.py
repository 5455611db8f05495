"""The repository holds the schema it serves: `schema.graphql` at the root is what
`feedfabric export-schema` prints, so every schema change shows up as a reviewed diff of that file
and a clone carries its own contract. (test_contract.py checks the served schema against the
external contract as well.)"""

from pathlib import Path

from feedfabric.app import schema

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schema.graphql"
REGENERATE = "feedfabric export-schema > schema.graphql"


def test_schema_graphql_is_the_served_schema() -> None:
    served = schema.as_str() + "\n"  # export-schema prints it with print()
    assert SCHEMA_FILE.exists(), f"schema.graphql is missing at the repository root; run `{REGENERATE}`"
    assert SCHEMA_FILE.read_text() == served, (
        f"the served schema differs from schema.graphql; if the change is deliberate, run `{REGENERATE}` "
        "at the repository root and commit the diff"
    )
