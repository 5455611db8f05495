"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The file must satisfy the Compose Specification's JSON schema (vendored in
tests/data), and the structure operators rely on: every service has an image
or a build, every depends_on target exists, long-running services have health
checks, the FeedFabric processes get the environment of OPERATIONS.md and run
real `feedfabric` subcommands and read only settings the code has, and the
scaled shape (docs/operations.md, "Scaling out"): Postgres with a streaming
replica, a 3-master Redis Cluster, three KRaft Kafka nodes, two API instances
behind a balancer, two relays, two workers.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from feedfabric.cli import build_parser
from feedfabric.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
APP_SERVICES = ("migrate", "api-1", "api-2", "relay", "worker")
API_INSTANCES = ("api-1", "api-2")
REDIS_NODES = ("redis-1", "redis-2", "redis-3", "redis-4", "redis-5", "redis-6")
KAFKA_NODES = ("kafka-1", "kafka-2", "kafka-3")
LONG_RUNNING = (
    "postgres",
    "postgres-replica",
    *REDIS_NODES,
    *KAFKA_NODES,
    *API_INSTANCES,
    "balancer",
    "relay",
    "worker",
    "prometheus",
    "grafana",
)
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
    for name in (*API_INSTANCES, "relay", "worker"):
        assert all_services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert all_services[name]["depends_on"]["redis-cluster"]["condition"] == "service_completed_successfully"
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
    env = services(compose)["api-1"]["environment"]
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
        "RATE_LIMIT_COST",
        "MAX_SUBSCRIPTIONS_PER_CONNECTION",
        "WS_MAX_SOCKETS_PER_MEMBER",
        "WS_INIT_TIMEOUT_SECONDS",
        "WS_MAX_MESSAGES_PER_SECOND",
        "OUTBOX_RETENTION_HOURS",
        "KAFKA_RETENTION_HOURS",
        "DEAD_LETTER_RETENTION_DAYS",
        "MAINTAIN_INTERVAL_SECONDS",
        "READ_REPLICA_MAX_LAG_MS",
        "READ_YOUR_WRITES_SECONDS",
    ):
        assert float(interpolated_default(env[key])) == getattr(defaults, key.lower()), key
    assert interpolated_default(env["FEEDFABRIC_PRODUCTION"]) == "1"
    assert "?" in env["FEEDFABRIC_JWT_SECRET"], "the secret must be required, never defaulted"


def test_commands_are_real_subcommands(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name in APP_SERVICES:
        args = parser.parse_args(services(compose)[name]["command"])
        assert args.command == services(compose)[name]["command"][0]


def test_every_feedfabric_service_is_checked_as_an_app_service(compose: dict[str, Any]) -> None:
    """A service running this repo's image that is not in APP_SERVICES would escape the environment checks."""
    ours = {
        name
        for name, service in services(compose).items()
        if "build" in service or str(service.get("image", "")).startswith("feedfabric")
    }
    assert ours == set(APP_SERVICES)


def test_every_service_environment_has_a_check(compose: dict[str, Any]) -> None:
    """The engines' environments are checked against what the app services read (below and the Kafka test)."""
    checked = {*APP_SERVICES, *KAFKA_NODES, "postgres", "postgres-replica"}
    with_environment = {name for name, service in services(compose).items() if service.get("environment")}
    assert with_environment <= checked, with_environment - checked


def test_postgres_serves_the_database_and_credentials_the_app_services_use(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    primary = all_services["postgres"]["environment"]
    user, password, database = (
        interpolated_default(primary[k]) for k in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB")
    )
    for name in APP_SERVICES:
        env = all_services[name]["environment"]
        # The primary URL names both hosts, writes going to whichever accepts them (failover on its own).
        url = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", env["DATABASE_URL"])
        both = "postgres:5432,postgres-replica:5432"
        assert url == f"postgresql://{user}:{password}@{both}/{database}?target_session_attrs=read-write", name
        url = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", env["DATABASE_READ_URL"])
        assert url == f"postgresql://{user}:{password}@postgres-replica:5432/{database}", name
    replica = all_services["postgres-replica"]["environment"]
    assert replica["PRIMARY_HOST"] == "postgres"
    assert interpolated_default(replica["REPLICATION_PASSWORD"]) == interpolated_default(
        primary["REPLICATION_PASSWORD"]
    )
    for name in ("postgres", "postgres-replica"):
        assert f"pg_isready -U {user} -d {database}" in " ".join(all_services[name]["healthcheck"]["test"]), name


def _host(url: str) -> str:
    return re.sub(r"^[a-z]+://([^@/]*@)?", "", url).split("/")[0].split(":")[0]


def test_every_service_environment_is_read_by_the_settings(compose: dict[str, Any]) -> None:
    """Each app service's environment, defaults filled in, is a valid Settings: every name is a field the code
    reads, every value parses, and every URL names a service of this file that the service waits for."""
    all_services = services(compose)
    for name in APP_SERVICES:
        service = all_services[name]
        env = {k: interpolated_default(v) for k, v in service["environment"].items() if k != "HF_HUB_OFFLINE"}
        env["FEEDFABRIC_JWT_SECRET"] = "x"
        settings = Settings(**{k.lower(): v for k, v in env.items()})
        hosts = {_host(settings.database_url or "")}
        if name != "migrate":
            hosts |= {_host(settings.redis_url or ""), _host(settings.database_read_url or "")}
            hosts |= {_host(b) for b in (settings.kafka_bootstrap_servers or "").split(",")}
        waits_for = set(service.get("depends_on") or {})
        for host in hosts:
            assert host in all_services, (name, host)
        assert "postgres" in waits_for or "migrate" in waits_for, name


def test_the_api_reads_from_the_streaming_replica(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    env = all_services["api-1"]["environment"]
    assert _host(env["DATABASE_READ_URL"]) == "postgres-replica"
    assert _host(env["DATABASE_URL"]) == "postgres"
    replica = all_services["postgres-replica"]
    script = (ROOT / "deploy" / "postgres" / "replica-entrypoint.sh").read_text()
    assert "pg_basebackup" in script and " -R" in script
    assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    primary = all_services["postgres"]
    assert "wal_level=replica" in primary["command"]
    assert any("primary-init.sh" in v for v in primary["volumes"])
    for name in API_INSTANCES:
        assert all_services[name]["depends_on"]["postgres-replica"]["condition"] == "service_healthy"


def test_two_api_instances_each_name_their_realtime_group_behind_one_balancer(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    instances = {all_services[n]["environment"]["FEEDFABRIC_INSTANCE"] for n in API_INSTANCES}
    assert len(instances) == len(API_INSTANCES)
    for name in API_INSTANCES:
        api = all_services[name]
        assert "container_name" not in api and "ports" not in api  # reached through the balancer only
        assert build_parser().parse_args(api["command"]).host == "0.0.0.0"
    balancer = all_services["balancer"]
    assert set(balancer["depends_on"]) == set(API_INSTANCES)
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    for name in API_INSTANCES:
        assert f"server {name}:8000" in nginx
    assert "ip_hash" not in nginx and "sticky" not in nginx.replace("nothing sticky", "")
    assert "Upgrade $http_upgrade" in nginx  # WebSockets pass through
    assert "limit_conn per_address" in nginx  # sockets that never sign in are bounded by address
    assert "Host $http_host" in nginx  # the port too: a same-origin socket passes the Origin check
    assert "X-Forwarded-Proto $scheme" in nginx and "gzip on" in nginx
    for name in ("relay", "worker"):
        assert all_services[name]["deploy"]["replicas"] >= 2, name


def test_kafka_is_three_kraft_nodes_with_at_least_three_partitions_a_topic(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    voters = set()
    for name in KAFKA_NODES:
        kafka = all_services[name]
        assert kafka["image"].startswith("apache/kafka:")
        env = kafka["environment"]
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        assert f"PLAINTEXT://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
        assert int(interpolated_default(env["KAFKA_NUM_PARTITIONS"])) >= 3
        assert int(env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) == 3
        voters.add(env["KAFKA_CONTROLLER_QUORUM_VOTERS"])
        assert env["CLUSTER_ID"]
    assert voters == {"1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"}
    app_env = all_services["api-1"]["environment"]
    assert set(app_env["KAFKA_BOOTSTRAP_SERVERS"].split(",")) == {f"{n}:9092" for n in KAFKA_NODES}
    assert int(interpolated_default(app_env["KAFKA_TOPIC_PARTITIONS"])) >= 3


def test_redis_is_a_three_master_cluster_that_keeps_full_timelines_compact(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    feed_max = int(interpolated_default(all_services["api-1"]["environment"]["FEED_MAX_LENGTH"]))
    for name in REDIS_NODES:
        command = [str(part) for part in all_services[name]["command"]]
        assert command[command.index("--cluster-enabled") + 1] == "yes"
        entries = int(command[command.index("--zset-max-listpack-entries") + 1])
        assert entries >= feed_max + 1  # fan-out adds before it trims
        assert int(command[command.index("--zset-max-listpack-value") + 1]) >= 36  # a UUID
        assert re.fullmatch(r"\$\{REDIS_MAXMEMORY:-\d+(mb|gb)\}|\d+(mb|gb)", command[command.index("--maxmemory") + 1])
        # Timelines carry no TTL, so a volatile-* policy could evict nothing and writes would fail when full.
        assert command[command.index("--maxmemory-policy") + 1] == "allkeys-lru"
    create = " ".join(all_services["redis-cluster"]["command"])
    # Every master has a replica: losing one fails over instead of losing a third of the timelines.
    assert "--cluster create" in create and "--cluster-replicas 1" in create
    for name in REDIS_NODES:
        assert f"{name}:6379" in create
    env = all_services["api-1"]["environment"]
    assert env["REDIS_CLUSTER"] == "1" and _host(env["REDIS_URL"]) in REDIS_NODES


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


def test_the_api_instances_take_the_client_address_from_the_balancer_alone(compose: dict[str, Any]) -> None:
    """The signed-out rate limit counts per client address: the instances must read it from the balancer's
    X-Forwarded-For (else every signed-out client shares the balancer's one budget), and from no one else's."""
    all_services = services(compose)
    balancer = ipaddress.ip_address(
        interpolated_default(all_services["balancer"]["networks"]["default"]["ipv4_address"])
    )
    subnet = ipaddress.ip_network(interpolated_default(compose["networks"]["default"]["ipam"]["config"][0]["subnet"]))
    assert balancer in subnet
    for name in API_INSTANCES:
        assert interpolated_default(all_services[name]["environment"]["FORWARDED_ALLOW_IPS"]) == str(balancer)
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "X-Forwarded-For $proxy_add_x_forwarded_for" in nginx  # uvicorn takes the rightmost untrusted address


def test_traces_go_from_every_process_to_the_collector_and_on_to_jaeger(compose: dict[str, Any]) -> None:
    all_services = services(compose)
    collector_mount = next(v for v in all_services["otel-collector"]["volumes"] if "otel-collector" in v)
    config = yaml.safe_load((ROOT / collector_mount.split(":")[0]).read_text())
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    for name in ("api-1", "api-2", "relay", "worker"):
        endpoint = all_services[name]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert endpoint == f"http://otel-collector:{http.rsplit(':', 1)[1]}", name
        assert "otel-collector" in all_services[name]["depends_on"], name
    exporters = config["service"]["pipelines"]["traces"]["exporters"]
    assert [_host("grpc://" + config["exporters"][e]["endpoint"]) for e in exporters] == ["jaeger"]
    assert "jaeger" in all_services
