"""Real Redis deployments started by the tests: a 3-master cluster, a sentinel-watched
master and replica, TLS and ACL servers. Loopback only, free ports, temp dirs; every
process is stopped by the fixture that started it."""

from __future__ import annotations

import functools
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gevent
import pytest
import redis

from tests.helpers import NO_RETRY, free_port, stop_process, wait_until

HOST = "127.0.0.1"


def require(exe: str) -> str:
    path = shutil.which(exe)
    if path is None:
        pytest.skip(f"{exe} is not installed (apt-get install -y redis-server)")
    return path


@dataclass
class Node:
    """One redis-server (or sentinel) process on 127.0.0.1:``port``."""

    port: int
    proc: subprocess.Popen[bytes]
    workdir: Path

    @property
    def log(self) -> str:
        path = self.workdir / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self, **kwargs: object) -> redis.Redis:
        kwargs.setdefault("socket_timeout", 5)
        return redis.Redis(HOST, self.port, retry=NO_RETRY, **kwargs)  # type: ignore[arg-type]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no save, as a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        stop_process(self.proc)


def start_node(
    root: Path, args: Sequence[str], *, sentinel: bool = False, port: int | None = None,
    ready: bool = True, bus: bool = False,
) -> Node:  # fmt: skip
    """Start ``redis-server`` with ``args`` (a config file for a sentinel) in its own dir;
    ``bus``: on a cluster bus port of its own (the default, port + 10000, fails above 55535
    and may be taken).

    A port this picks may be taken between free_port() and the server's bind (by another
    process's outgoing connection, say): then it starts again on new ports, as
    tests/helpers.start_redis_server does.
    """
    if port is not None:
        return _launch(root, args, sentinel, port, ready)
    for attempt in range(3):
        port, extra = _ports(bus)
        node = _launch(root, [*args, *extra], sentinel, port, ready=False)
        try:
            wait_for_ping(node)
            return node
        except AssertionError:
            node.stop()
            if "Address already in use" not in node.log or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _ports(bus: bool) -> tuple[int, list[str]]:
    """A free port for a server, and its cluster bus option: a free port of its own where
    the server takes one (Redis 7.0+, Valkey); Redis 6.2's bus is always port + 10000, so
    there both must be free."""
    if not bus:
        return free_port(), []
    if _takes_cluster_port():
        return free_port(), ["--cluster-port", str(free_port())]
    while True:
        port = free_port()
        if port + 10000 <= 65535 and _is_free(port + 10000):
            return port, []


@functools.cache
def _takes_cluster_port() -> bool:
    """Whether the PATH's redis-server has ``cluster-port`` (Redis 7.0 and newer)."""
    version = subprocess.run([require("redis-server"), "--version"], capture_output=True,
                             text=True, timeout=10, check=True).stdout  # fmt: skip
    found = re.search(r"v=(\d+)\.(\d+)", version)
    return found is None or (int(found.group(1)), int(found.group(2))) >= (7, 0)


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _launch(root: Path, args: Sequence[str], sentinel: bool, port: int, ready: bool) -> Node:
    exe = require("redis-server")
    workdir = root / f"node-{uuid.uuid4().hex[:8]}"
    workdir.mkdir(parents=True, exist_ok=True)
    command = [exe]
    if sentinel:
        conf = workdir / "sentinel.conf"
        conf.write_text("\n".join(args) + "\n")
        command += [str(conf), "--sentinel"]
        args = []
    command += ["--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
                "--dir", str(workdir), "--logfile", str(workdir / "redis.log"), *args]  # fmt: skip
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    node = Node(port, proc, workdir)
    if ready:
        wait_for_ping(node)
    return node


def wait_for_ping(node: Node, timeout: float = 10.0, **kwargs: object) -> None:
    def answers() -> bool:
        if node.proc.poll() is not None:
            raise AssertionError(f"redis-server on port {node.port} exited; log:\n{node.log}")
        client = node.client(socket_connect_timeout=0.2, **kwargs)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    wait_until(answers, timeout, 0.05, f"redis-server on port {node.port}")


# --------------------------------------------------------------------------- cluster


@dataclass
class Cluster:
    nodes: list[Node]
    root: Path
    killed: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        live = [n for n in self.nodes if n not in self.killed]
        return "redis+cluster://" + ",".join(f"{HOST}:{n.port}" for n in live[:2]) + "/"

    def client(self) -> redis.cluster.RedisCluster:
        from redis.cluster import ClusterNode, RedisCluster

        live = [n for n in self.nodes if n not in self.killed]
        return RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in live])

    def masters(self) -> dict[int, tuple[int, int]]:
        """port of each live master -> its slot range (first, last)."""
        live = next(n for n in self.nodes if n not in self.killed)
        found: dict[int, tuple[int, int]] = {}
        with live.client() as client:
            for first, last, master, *_ in client.execute_command("CLUSTER SLOTS"):
                found[int(master[1])] = (int(first), int(last))
        return found

    def node(self, port: int) -> Node:
        return next(n for n in self.nodes if n.port == port)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_cluster(root: Path, masters: int = 3) -> Cluster:
    """``masters`` masters with one replica each, created with ``redis-cli --cluster``."""
    cli = require("redis-cli")
    args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
            "--cluster-config-file", "nodes.conf"]  # fmt: skip
    nodes: list[Node] = []
    cluster = Cluster(nodes, root)
    try:
        for _ in range(masters * 2):  # one by one, so that a failed start stops the others
            nodes.append(start_node(root, args, bus=True))
        create = [cli, "--cluster", "create", *(f"{HOST}:{n.port}" for n in nodes),
                  "--cluster-replicas", "1", "--cluster-yes"]  # fmt: skip
        result = subprocess.run(create, capture_output=True, timeout=60)
        assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
        wait_until(lambda: _cluster_ok(cluster, masters), 30, 0.1, "cluster state ok")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _cluster_ok(cluster: Cluster, masters: int) -> bool:
    if not _all_ok(cluster):
        return False
    for node in cluster.nodes:
        if node in cluster.killed:
            continue
        with node.client() as client:
            replication = client.info("replication")
            if replication["role"] == "slave" and replication.get("master_link_status") != "up":
                return False
    return len(cluster.masters()) == masters


def _state_ok(client: redis.Redis) -> bool:
    info = client.execute_command("CLUSTER INFO")
    if isinstance(info, dict):  # parsed by redis-py
        return str(info.get("cluster_state")) == "ok"
    return "cluster_state:ok" in (info.decode() if isinstance(info, bytes) else str(info))


def fail_over_master(cluster: Cluster, port: int, timeout: float = 30.0) -> int:
    """SIGKILL master ``port``, wait until its replica serves its slots; the new port."""
    slots = cluster.masters()[port]
    cluster.node(port).kill()
    cluster.killed.append(cluster.node(port))

    def promoted() -> int:
        try:
            found = cluster.masters()
        except (redis.RedisError, OSError):
            return 0
        for master, owned in found.items():
            if owned == slots and master != port:
                return master
        return 0

    new_port = wait_until(promoted, timeout, 0.1, f"a replica of {port} promoted")
    wait_until(lambda: _all_ok(cluster), timeout, 0.1, "cluster state ok after failover")
    return new_port


def _all_ok(cluster: Cluster) -> bool:
    for node in cluster.nodes:
        if node in cluster.killed:
            continue
        with node.client() as client:
            if not _state_ok(client):
                return False
    return True


def tags_on_each_master(cluster: Cluster, prefix: str) -> list[str]:
    """One queue name per master: ``{prefix-N}`` whose hash tag lands in its slots."""
    from redis.crc import key_slot

    wanted = sorted(cluster.masters().values())
    names: list[str] = []
    for first, last in wanted:
        n = 0
        while not first <= key_slot(f"{prefix}-{n}".encode()) <= last:
            n += 1
        names.append(f"{{{prefix}-{n}}}")
    return names


# --------------------------------------------------------------------------- sentinel


@dataclass
class SentinelSetup:
    master: Node
    replica: Node
    sentinels: list[Node]
    service: str

    @property
    def url(self) -> str:
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def master_port(self) -> int:
        with self.sentinels[0].client() as client:
            host, port = client.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)
        return int(port)

    def stop(self) -> None:
        for node in [*self.sentinels, self.master, self.replica]:
            node.stop()


def start_sentinel(root: Path, service: str = "gqmaster") -> SentinelSetup:
    master = start_node(root, [])
    replica = start_node(root, ["--replicaof", HOST, str(master.port)])
    sentinels: list[Node] = []
    try:
        wait_until(lambda: _link_up(replica), 15, 0.05, "the replica in sync")
        config = [
            f"sentinel monitor {service} {HOST} {master.port} 1",
            f"sentinel down-after-milliseconds {service} 1000",
            f"sentinel failover-timeout {service} 5000",
            f"sentinel parallel-syncs {service} 1",
        ]
        sentinels.append(start_node(root, config, sentinel=True))
        setup = SentinelSetup(master, replica, sentinels, service)
        wait_until(lambda: _sentinel_sees_replica(setup), 15, 0.05, "sentinel sees the replica")
    except BaseException:
        for node in [*sentinels, replica, master]:
            node.stop()
        raise
    return setup


def _link_up(replica: Node) -> bool:
    with replica.client() as client:
        return client.info("replication").get("master_link_status") == "up"


def _sentinel_sees_replica(setup: SentinelSetup) -> bool:
    with setup.sentinels[0].client() as client:
        replicas = client.execute_command("SENTINEL REPLICAS", setup.service)
    return bool(replicas)


# --------------------------------------------------------------------------- TLS


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1 / localhost, made with openssl."""
    openssl = require("openssl")
    paths = {name: directory / f"{name}.pem" for name in ("ca", "ca-key", "cert", "key")}
    csr = directory / "server.csr"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    commands = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gq test CA",
         "-keyout", paths["ca-key"], "-out", paths["ca"]],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", paths["key"], "-out", csr],
        ["x509", "-req", "-in", csr, "-CA", paths["ca"], "-CAkey", paths["ca-key"],
         "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", paths["cert"]],
    ]  # fmt: skip
    for command in commands:
        subprocess.run([openssl, *map(str, command)], check=True, capture_output=True)
    return paths


def start_tls_server(root: Path, certs: dict[str, Path]) -> Node:
    """A redis-server that speaks TLS only (plain port off), clients not authenticated."""
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(certs["cert"]),
            "--tls-key-file", str(certs["key"]), "--tls-ca-cert-file", str(certs["ca"]),
            "--tls-auth-clients", "no"]  # fmt: skip
    node = start_node(root, args, port=0, ready=False)
    node.port = tls_port
    deadline = time.monotonic() + 10
    while "Ready to accept connections" not in node.log:
        if node.proc.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise AssertionError(f"TLS redis-server did not start; log:\n{node.log}")
        gevent.sleep(0.05)
    return node


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Cluster of 3 masters for one test module (named ``cluster`` where it is used:
    ``cluster = module_cluster``)."""
    started = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()

