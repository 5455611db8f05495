"""docs/api.md names every setting, REST route, event and error code the code defines, so the reference
cannot fall behind the code without a test saying what it lacks."""

from __future__ import annotations

import re
from pathlib import Path

from feedfabric.cli import build_parser
from feedfabric.core import errors
from feedfabric.core.events import TOPIC_OF
from feedfabric.core.settings import Settings
from feedfabric.rest.routes import routes

API_DOC = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()


def _named(names: set[str]) -> list[str]:
    return sorted(
        name
        for name in names
        if f"`{name}`" not in API_DOC and not re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", API_DOC)
    )


def test_every_environment_variable_is_documented() -> None:
    assert _named({field.upper() for field in Settings.model_fields}) == []


def test_every_command_is_documented() -> None:
    choices = re.search(r"\{([a-z,-]+)\}", build_parser().format_usage())
    assert choices is not None
    commands = choices.group(1).split(",")
    assert "export-schema" in commands
    assert _named({f"feedfabric {name}" for name in commands}) == []


def test_every_rest_route_is_documented() -> None:
    documented = {re.sub(r"\{[^}]*\}", "{}", path) for path in re.findall(r"(/[a-z][a-z/{}A-Za-z_-]*)", API_DOC)}
    paths = {re.sub(r"\{[^}]*\}", "{}", route.path) for route in routes()}
    assert sorted(paths - documented) == []


def test_every_event_is_documented() -> None:
    assert _named(set(TOPIC_OF)) == []


def test_every_error_code_is_documented() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.FeedFabricError)]
    assert _named({c.code for c in classes} | {c.rest_code for c in classes}) == []
