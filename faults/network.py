"""Hosts on one machine: a network namespace each, a veth pair to one bridge, an address of its own.

The harness itself stays in the root namespace, which holds the bridge and
its first address (`.1`), so it reaches every host the way a client or a
load balancer would. Faults are routes: cutting a pair of hosts adds a
blackhole route to the other's address on each side (no netfilter needed),
cutting a host cuts it from every other host and from the harness, and
healing deletes the routes. A blackhole route drops what is already flowing
(retransmits vanish, so an open TCP connection hangs until its own timeouts)
and refuses new connections from the cut side at once.

Everything a run makes is named with its run prefix (`ffnet-<pid hex>-...`,
bridge `ffbr<pid hex>`), so a run that was killed (SIGKILL, a crashed test
session) leaves names that the next run recognises by their dead owner and
sweeps before it starts. Processes started in the namespaces die with the
harness (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ffnet-"
BRIDGE_PREFIX = "ffbr"
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
ROOT = "harness"  # the root namespace's name in cut() and heal()


class NetworkUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, or no `ip`)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def require_root() -> None:
    if os.geteuid() != 0:
        raise NetworkUnavailable(
            "the network fault cases make network namespaces, veth pairs and a bridge (`ip netns`),"
            " which needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); run them as root, as CI does"
        )
    if subprocess.run(["ip", "-V"], capture_output=True, check=False).returncode != 0:
        raise NetworkUnavailable("the network fault cases need iproute2's `ip` command")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Deletes the namespaces and bridges of runs whose process is gone; returns what it deleted."""
    removed: list[str] = []
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX) :].split("-", 1)[0]
        with contextlib.suppress(ValueError):
            if not _alive(int(owner, 16)):
                _ip("netns", "del", name, check=False)
                removed.append(name)
    for line in _ip("-o", "link", "show", "type", "bridge").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if not name.startswith(BRIDGE_PREFIX):
            continue
        with contextlib.suppress(ValueError):
            if not _alive(int(name[len(BRIDGE_PREFIX) :], 16)):
                _ip("link", "del", name, check=False)
                removed.append(name)
    return removed


def _free_subnet() -> int:
    """A third octet for 10.213.X.0/24 that no interface of this machine uses."""
    used = _ip("-o", "-4", "addr", "show").stdout
    for octet in range(1, 255):
        if f"10.213.{octet}." not in used:
            return octet
    raise NetworkUnavailable("no free 10.213.X.0/24 subnet for the fault network")


@dataclass
class Host:
    name: str
    netns: str
    address: str


@dataclass
class Network:
    """One run's bridge and hosts; `close()` (or the context manager) deletes all of it."""

    run_id: str = field(default_factory=lambda: f"{os.getpid():x}")
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: set[tuple[str, str]] = field(default_factory=set)
    _octet: int = 0
    _closed: bool = False

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.run_id}"

    @property
    def gateway(self) -> str:
        return f"10.213.{self._octet}.1"

    def open(self) -> Network:
        require_root()
        sweep_stale()
        self._octet = _free_subnet()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def add(self, name: str) -> Host:
        """A namespace with loopback up and eth0 (a veth whose other end is on the bridge) at .N."""
        index = len(self.hosts) + 2
        netns = f"{PREFIX}{self.run_id}-{name}"
        outer = f"ffv{self.run_id}{index:02d}"[:15]
        address = f"10.213.{self._octet}.{index}"
        # A run killed mid-cut leaves its root-side route behind, and it would cut this host from the start.
        _ip("route", "del", "blackhole", f"{address}/32", check=False)
        _ip("netns", "add", netns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        host = Host(name, netns, address)
        self.hosts[name] = host
        return host

    def _address(self, name: str) -> str:
        return self.gateway if name == ROOT else self.hosts[name].address

    def _route(self, verb: str, side: str, to: str) -> None:
        prefix = [] if side == ROOT else ["-n", self.hosts[side].netns]
        _ip(*prefix, "route", verb, "blackhole", f"{self._address(to)}/32", check=verb == "add")

    def cut_pair(self, a: str, b: str) -> None:
        """No packet between `a` and `b` either way (ROOT names the harness: clients, the balancer)."""
        key = tuple(sorted((a, b)))
        if key in self.cuts:
            return
        self._route("add", a, b)
        self._route("add", b, a)
        self.cuts.add((key[0], key[1]))

    def heal_pair(self, a: str, b: str) -> None:
        key = tuple(sorted((a, b)))
        if key not in self.cuts:
            return
        self._route("del", a, b)
        self._route("del", b, a)
        self.cuts.discard((key[0], key[1]))

    def cut_host(self, name: str) -> None:
        """`name` off the network: cut from every other host and from the harness."""
        for other in [ROOT, *self.hosts]:
            if other != name:
                self.cut_pair(name, other)

    def heal(self) -> None:
        """Every cut healed."""
        for a, b in list(self.cuts):
            self.heal_pair(a, b)

    def preexec(self, host: str, run_as: tuple[int, int] | None = None) -> Callable[[], None]:
        """For Popen(preexec_fn=...): joins the host's namespace, drops to `run_as` (uid, gid), and dies
        with the harness (the death signal is set after the uid change, which clears it)."""
        path = f"/run/netns/{self.hosts[host].netns}"

        def prepare() -> None:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            fd = os.open(path, os.O_RDONLY)
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                os._exit(97)
            os.close(fd)
            os.setsid()
            if run_as is not None:
                os.setgroups([])
                os.setgid(run_as[1])
                os.setuid(run_as[0])
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

        return prepare

    def spawn(
        self,
        host: str,
        argv: list[str],
        log: Path,
        env: dict[str, str] | None = None,
        run_as: tuple[int, int] | None = None,
    ) -> subprocess.Popen[bytes]:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                argv,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=self.preexec(host, run_as),
            )

    def run(self, host: str, argv: list[str], run_as: tuple[int, int] | None = None, timeout: float = 120) -> str:
        """A short command on `host`, its output returned; raises on a non-zero exit."""
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, preexec_fn=self.preexec(host, run_as), check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{host}: {' '.join(argv[:3])}...: {(done.stderr or done.stdout).strip()[-800:]}")
        return done.stdout

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for host in self.hosts.values():
            _ip("netns", "del", host.netns, check=False)
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> Network:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def terminating_cleanly() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit, so `finally` blocks (Network.close) run on a polite kill."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for s in previous:
        signal.signal(s, leave)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":  # `python -m faults.network sweep`: what a killed run left, deleted
    require_root()
    print("\n".join(sweep_stale()) or "nothing stale", file=sys.stderr)
