"""The served schema keeps every name and type of the public contract.

What a later issue still has to build is listed in contract_pending.txt;
that list only ever shrinks.
"""

from pathlib import Path

from feedfabric.app import schema
from graphql import build_schema
from graphql.utilities import find_breaking_changes

CONTRACT = Path(__file__).resolve().parents[1].parent / "shared" / "contract" / "schema.graphql"
PENDING = Path(__file__).with_name("contract_pending.txt")


def _contract_sdl() -> str:
    if CONTRACT.exists():
        return CONTRACT.read_text()
    return (Path(__file__).with_name("contract_schema.graphql")).read_text()


def test_every_breaking_change_is_a_pending_part_of_the_contract() -> None:
    served = build_schema(schema.as_str())
    contract = build_schema(_contract_sdl())
    pending = {line.strip() for line in PENDING.read_text().splitlines() if line.strip()}
    unexpected = [c.description for c in find_breaking_changes(contract, served) if c.description not in pending]
    assert unexpected == []


def test_the_pending_list_names_only_what_is_still_missing() -> None:
    served = build_schema(schema.as_str())
    contract = build_schema(_contract_sdl())
    missing = {c.description for c in find_breaking_changes(contract, served)}
    pending = {line.strip() for line in PENDING.read_text().splitlines() if line.strip()}
    assert pending <= missing, f"built already, remove from contract_pending.txt: {sorted(pending - missing)}"
