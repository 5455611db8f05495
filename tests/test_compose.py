"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The file must satisfy the Compose Specification's JSON schema (vendored in
tests/data), and the structure operators rely on: every service has an image
or a build, every depends_on target exists, long-running services have health
checks, the FeedFabric processes get the environment of OPERATIONS.md and run
real `feedfabric` subcommands, Kafka is one KRaft node with no volume, Redis
keeps full timelines compact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from feedfabric.cli import build_parser
from feedfabric.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
APP_SERVICES = ("migrate", "api", "relay", "worker")
LONG_RUNNING = ("postgres", "redis", "kafka", "api", "relay", "worker", "prometheus")
# The environment table of OPERATIONS.md (the contract); checked against the document when it is beside the repo.
CONTRACT_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "KAFKA_BOOTSTRAP_SERVERS",
    "FEEDFABRIC_JWT_SECRET",
    "FEED_MAX_LENGTH",
    "FANOUT_BATCH_SIZE",
    "CELEBRITY_FOLLOWER_THRESHOLD",
    "INACTIVE_AFTER_DAYS",
    "OUTBOX_BATCH_SIZE",
    "OUTBOX_IDLE_MS",
    "KAFKA_TOPIC_PARTITIONS",
)
_DEFAULT = re.compile(r"^\$\{[A-Z_]+:-([^}]*)\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]  # type: ignore[no-any-return]


def interpolated_default(value: Any) -> str:
    """`${NAME:-default}` → default; anything else as written."""
    match = _DEFAULT.match(str(value))
    return match.group(1) if match else str(value)


def test_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


def test_the_schema_check_has_teeth() -> None:
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    bad = {"services": {"api": {"image": "x", "depends_on": {"db": {"condition": "whenever"}}, "bogus": 1}}}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))


def test_every_service_has_an_image_or_build(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            context = service["build"] if isinstance(service["build"], str) else service["build"]["context"]
            assert (ROOT / context / "Dockerfile").is_file(), name


def test_depends_on_targets_exist_and_wait_properly(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    for name, service in all_services.items():
        for target, rule in (service.get("depends_on") or {}).items():
            assert target in all_services, f"{name} depends on unknown {target}"
            condition = rule["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in all_services[target], f"{name} waits for {target}'s missing healthcheck"
    for name in ("api", "relay", "worker"):
        assert all_services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert all_services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert all_services["migrate"]["restart"] == "no"


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = services(compose)[name].get("healthcheck")
        assert check and check.get("test"), name


def test_app_services_get_the_contract_environment(compose: dict[str, Any]) -> None:
    contract = ROOT.parent / "shared" / "contract" / "OPERATIONS.md"
    names = set(CONTRACT_ENV)
    if contract.is_file():
        table = re.findall(r"^\| `([A-Z_]+)` \|", contract.read_text(), flags=re.M)
        assert set(table) >= names, "OPERATIONS.md lost a variable this test expects"
        names |= set(table)
    settings_fields = set(Settings.model_fields)
    for name in APP_SERVICES:
        env = services(compose)[name]["environment"]
        assert names <= set(env), (name, names - set(env))
        # Every variable set is one the app reads (a typo would be silently ignored).
        unknown = {k for k in env if k.lower() not in settings_fields} - {"HF_HUB_OFFLINE"}
        assert not unknown, (name, unknown)


def test_defaults_match_the_settings(compose: dict[str, Any]) -> None:
    env = services(compose)["api"]["environment"]
    defaults = Settings()
    for key in (
        "FEED_MAX_LENGTH",
        "FANOUT_BATCH_SIZE",
        "CELEBRITY_FOLLOWER_THRESHOLD",
        "INACTIVE_AFTER_DAYS",
        "OUTBOX_BATCH_SIZE",
        "OUTBOX_IDLE_MS",
        "KAFKA_TOPIC_PARTITIONS",
        "GRAPHQL_MAX_COST",
        "RATE_LIMIT_OPERATIONS",
        "RATE_LIMIT_WINDOW_SECONDS",
        "MAX_SUBSCRIPTIONS_PER_CONNECTION",
    ):
        assert int(interpolated_default(env[key])) == getattr(defaults, key.lower()), key
    assert interpolated_default(env["FEEDFABRIC_PRODUCTION"]) == "1"
    assert "?" in env["FEEDFABRIC_JWT_SECRET"], "the secret must be required, never defaulted"


def test_commands_are_real_subcommands(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name in APP_SERVICES:
        args = parser.parse_args(services(compose)[name]["command"])
        assert args.command == services(compose)[name]["command"][0]


def test_api_runs_two_replicas_on_all_interfaces(compose: dict[str, Any]) -> None:
    api = services(compose)["api"]
    assert api["deploy"]["replicas"] == 2
    assert "container_name" not in api  # a fixed name would forbid replicas
    args = build_parser().parse_args(api["command"])
    assert args.host == "0.0.0.0"


def test_kafka_is_one_kraft_node_without_volume(compose: dict[str, Any]) -> None:
    kafka = services(compose)["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka:9093"
    assert "volumes" not in kafka
    app_env = services(compose)["api"]["environment"]
    assert app_env["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]


def test_redis_keeps_full_timelines_compact(compose: dict[str, Any]) -> None:
    command = [str(part) for part in services(compose)["redis"]["command"]]
    entries = int(command[command.index("--zset-max-listpack-entries") + 1])
    feed_max = int(interpolated_default(services(compose)["api"]["environment"]["FEED_MAX_LENGTH"]))
    assert entries >= feed_max + 1  # fan-out adds before it trims
    assert int(command[command.index("--zset-max-listpack-value") + 1]) >= 36  # a UUID


def test_redis_memory_is_bounded_and_evicts_what_can_be_rebuilt(compose: dict[str, Any]) -> None:
    command = [str(part) for part in services(compose)["redis"]["command"]]
    assert re.fullmatch(r"\d+(mb|gb)", command[command.index("--maxmemory") + 1])
    # Timelines carry no TTL, so a volatile-* policy could evict nothing and writes would fail when full.
    assert command[command.index("--maxmemory-policy") + 1] == "allkeys-lru"


def test_dockerfile() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, flags=re.M)
    assert "torch==2.13.0" in dockerfile and "--index-url https://download.pytorch.org/whl/cpu" in dockerfile
    assert re.search(r"^USER (?!root)", dockerfile, flags=re.M)
    assert "HEALTHCHECK" in dockerfile


def test_cpu_torch_index_only_inside_the_dockerfile() -> None:
    """The test machines install torch from their own disk; only the image build may use the CPU index."""
    for path in (ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / ".ci" / "run"):
        if path.is_file():
            assert "download.pytorch.org" not in path.read_text(), path
