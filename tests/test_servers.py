"""The servers gq accepts: ``valkey://`` URLs as ``redis://`` everywhere a URL is taken, and
servers older than Redis 6.2 refused at the first script call, naming their version."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import pytest
import redis
import redis.asyncio

import gq
import gq.aio
from gq.dashboard import _client as dashboard_client
from gq.errors import ConfigurationError
from gq.store import base, servers
from gq.store.connection import canonical_url, client_from_url, redact_url
from gq.store.jobs import RedisQueue
from tests.cli_support import ADMIN, WORKER, env_for, run
from tests.helpers import RedisServer, delete_keys, free_port, wait_until
from tests.topologies import HOST, Node, start_node

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("given", "read_as"),
    [
        ("valkey://h:1/2", "redis://h:1/2"),
        ("valkeys://u:p@h:1/0?ssl_cert_reqs=none", "rediss://u:p@h:1/0?ssl_cert_reqs=none"),
        ("VALKEY://h:1", "redis://h:1"),
        ("valkey+cluster://a:1,b:2/", "redis+cluster://a:1,b:2/"),
        ("valkeys+cluster://a:1/", "rediss+cluster://a:1/"),
        ("valkey+sentinel://a:1/mymaster/3", "redis+sentinel://a:1/mymaster/3"),
        ("valkeys+sentinel://a:1/mymaster", "rediss+sentinel://a:1/mymaster"),
        ("redis://h:1/2", "redis://h:1/2"),
        ("unix:///tmp/valkey.sock", "unix:///tmp/valkey.sock"),
        ("valkeyx://h:1", "valkeyx://h:1"),
    ],
)
def test_valkey_schemes_read_as_their_redis_twin(given: str, read_as: str) -> None:
    assert canonical_url(given) == read_as


def test_valkey_url_options_are_redis_ones() -> None:
    plain = client_from_url("valkey://somehost:7001/3").connection_pool.connection_kwargs
    assert (plain["host"], plain["port"], plain["db"]) == ("somehost", 7001, 3)
    tls = client_from_url("valkeys://somehost:7001/0").connection_pool
    assert tls.connection_class is redis.SSLConnection


def test_valkey_topology_urls_take_the_topology_paths() -> None:
    # A cluster URL checks its database before connecting: the cluster parser read it.
    with pytest.raises(ConfigurationError, match="a cluster has only database 0"):
        client_from_url("valkey+cluster://127.0.0.1:1/2")
    with pytest.raises(ConfigurationError, match="needs the service name"):
        client_from_url("valkeys+sentinel://127.0.0.1:1/")
    with pytest.raises(ConfigurationError, match="needs the service name"):
        gq.aio.client_from_url("valkey+sentinel://127.0.0.1:1/")


def test_unknown_scheme_names_the_valkey_forms() -> None:
    with pytest.raises(ConfigurationError, match="valkey://"):
        client_from_url("memcache://h:1")


@pytest.fixture
def queue_name(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_servers_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def valkey_url(server: RedisServer) -> str:
    return "valkey://" + server.url.split("://", 1)[1]


@pytest.mark.real_redis
def test_library_round_trip_over_a_valkey_url(redis_server: RedisServer, queue_name: str) -> None:
    url = valkey_url(redis_server)
    job_id = gq.Producer(queue_name, url=url).perform(b"hello")
    assert gq.Queue(queue_name, url=url).stats()["ready"] == 1
    assert dashboard_client(url).lrange(f"{queue_name}:active", 0, -1) == [job_id.encode()]
    consumer = gq.Consumer(queue_name, url=url)
    seen: list[tuple[str, bytes]] = []

    def handler(job: gq.Job) -> None:
        seen.append((job.id, job.data))
        consumer.stop()

    running = gevent.spawn(consumer.consume, handler)
    wait_until(lambda: running.ready(), 20, message="the consumer drained the job and stopped")
    running.get()
    assert seen == [(job_id, b"hello")]
    assert gq.Queue(queue_name, url=url).stats()["ready"] == 0
    assert not redis_server.client().hexists(f"{queue_name}:data", job_id)  # acknowledged


@pytest.mark.real_redis
def test_gq_worker_drains_a_queue_over_a_valkey_url(
    redis_server: RedisServer, queue_name: str
) -> None:
    ids = gq.Producer(queue_name, client=redis_server.client()).perform_many([b"", b"0.01"])
    url = valkey_url(redis_server)
    result = run(WORKER, "tests.handlers:record", "--burst", "--url", url,
                 env=env_for(None, queue_name, handler_url=redis_server.url))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"url={redact_url(url)}" in result.stderr  # the URL as given, not rewritten
    done = redis_server.client().lrange(f"{queue_name}:test:done", 0, -1)
    assert sorted(done) == sorted(i.encode() for i in ids)
    assert gq.Queue(queue_name, url=url).stats()["ready"] == 0
    assert redis_server.client().hlen(f"{queue_name}:data") == 0


@pytest.mark.real_redis
def test_asyncio_producer_over_a_valkey_url(redis_server: RedisServer, queue_name: str) -> None:
    async def main() -> str:
        async with gq.aio.Producer(queue_name, url=valkey_url(redis_server)) as producer:
            return await producer.perform(b"hello")

    job_id = asyncio.run(main())
    assert redis_server.client().lrange(f"{queue_name}:active", 0, -1) == [job_id.encode()]


@pytest.mark.real_redis
def test_cli_stats_over_a_valkey_url(redis_server: RedisServer, queue_name: str) -> None:
    gq.Producer(queue_name, client=redis_server.client()).perform_many([b"1", b"2"])
    result = run(ADMIN, "stats", "--json", "--url", valkey_url(redis_server),
                 env=env_for(None, queue_name))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ready"] == 2


# -- the oldest server ---------------------------------------------------------------------------


class ReportedVersion(redis.Redis):
    """The real Redis, but its ``INFO server`` says ``version`` (or is denied)."""

    def __init__(self, server: RedisServer, version: str | None) -> None:
        super().__init__(host=server.host, port=server.port, db=server.db,
                         username=server.username, password=server.password)  # fmt: skip
        self.version = version
        self.info_calls = 0

    def info(self, section: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.info_calls += 1
        if self.version is None:
            raise redis.exceptions.NoPermissionError("NOPERM this user has no permissions")
        return {"redis_version": self.version, "redis_mode": "standalone"}


@pytest.mark.real_redis
@pytest.mark.parametrize("version", ["6.0.16", "5.0.7", "4.0.9"])
def test_a_server_older_than_6_2_is_refused_by_version(
    redis_server: RedisServer, queue_name: str, version: str
) -> None:
    client = ReportedVersion(redis_server, version)
    with pytest.raises(ConfigurationError, match=rf"Redis {version} is older than Redis 6\.2"):
        gq.Producer(queue_name, client=client).perform(b"x")
    with pytest.raises(ConfigurationError, match="oldest server gq supports"):
        gq.Producer(queue_name, client=client).perform_many([b"a", b"b"])  # refused again
    assert not redis_server.client().exists(f"{queue_name}:data")


@pytest.mark.real_redis
@pytest.mark.parametrize("version", ["6.2.0", "6.2.5", "7.0.15", "7.2.4", "7.4.0-v1", "9.1.2"])
def test_6_2_and_newer_pass_with_one_info_per_client(
    redis_server: RedisServer, queue_name: str, version: str
) -> None:
    client = ReportedVersion(redis_server, version)
    gq.Producer(queue_name, client=client).perform(b"x")
    gq.Producer(queue_name + "b", client=client).perform_many([b"y", b"z"])
    assert client.info_calls == 1
    assert redis_server.client().llen(f"{queue_name}:active") == 1
    delete_keys(redis_server.client(), f"{queue_name}b*")


@pytest.mark.real_redis
def test_info_denied_by_an_acl_does_not_block(redis_server: RedisServer, queue_name: str) -> None:
    client = ReportedVersion(redis_server, None)
    gq.Producer(queue_name, client=client).perform(b"x")
    gq.Producer(queue_name, client=client).perform(b"y")
    assert client.info_calls == 1


class AsyncReportedVersion(redis.asyncio.Redis):
    def __init__(self, server: RedisServer, version: str) -> None:
        super().__init__(host=server.host, port=server.port, db=server.db,
                         username=server.username, password=server.password)  # fmt: skip
        self.version = version

    async def info(self, section: Any = None, *args: Any, **kwargs: Any) -> Any:
        return {"redis_version": self.version}


@pytest.mark.real_redis
def test_asyncio_producer_refuses_an_old_server(redis_server: RedisServer, queue_name: str) -> None:
    async def main() -> None:
        client = AsyncReportedVersion(redis_server, "6.0.9")
        try:
            await gq.aio.Producer(queue_name, client=client).perform(b"x")
        finally:
            await client.aclose()

    with pytest.raises(ConfigurationError, match=r"Redis 6\.0\.9 is older than Redis 6\.2"):
        asyncio.run(main())
    assert not redis_server.client().exists(f"{queue_name}:data")


def test_the_real_servers_info_is_judged_supported(redis_server: RedisServer) -> None:
    info = redis_server.client().info("server")
    assert servers.refusal(info) is None
    assert servers.version_tuple(str(info["redis_version"])) >= servers.OLDEST_SUPPORTED


# -- answers that differ by server ---------------------------------------------------------------
# Redis 6.2 wraps the error of a command called inside a script in the script's own error
# ("Error running script ... @user_script: 1: -OOM ..."); 7.0+ and Valkey answer the
# command's error with its code first. gq reads both the same (gq.store.servers.error_code).

WRAPPED_BY_6_2 = (
    "Error running script (call to f_bd6f3018b28bbdb36260f19d3c44afed740db987): "
    "@user_script:1: @user_script: 1: -{code} {text}"
)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (WRAPPED_BY_6_2.format(code="OOM", text="command not allowed"), "OOM"),
        (WRAPPED_BY_6_2.format(code="READONLY", text="You can't write"), "READONLY"),
        ("@user_script: 1: -READONLY You can't write against a read only replica.", "READONLY"),
        ("OOM command not allowed when used memory > 'maxmemory'. script: bd6f, on @user_s", "OOM"),
        ("BUSY Redis is busy running a script", "BUSY"),
        ("Error running script (call to f_8986): @user_script:1: WRONGTYPE Operation", ""),
        ("GQNOTREGISTERED c1", "GQNOTREGISTERED"),
        ("command not allowed when used memory > 'maxmemory'.", ""),
    ],
)
def test_the_code_of_an_error_is_read_on_every_server(text: str, code: str) -> None:
    assert servers.error_code(redis.ResponseError(text)) == code


@pytest.mark.parametrize("code", ["OOM", "READONLY", "LOADING", "MASTERDOWN"])
def test_a_wrapped_transient_error_is_not_a_refusal(code: str) -> None:
    wrapped = redis.ResponseError(WRAPPED_BY_6_2.format(code=code, text="not now"))
    assert not base.is_refusal(wrapped)
    assert base.out_of_memory(wrapped) == (code == "OOM")
    assert base.is_refusal(redis.ResponseError(WRAPPED_BY_6_2.format(code="X", text="no")))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Node]]:
    """Two servers of this run's kind (the PATH's redis-server, as the matrix sets it): one
    full (maxmemory 1, noeviction), one a replica of a master that is not there."""
    root = tmp_path_factory.mktemp("servers")
    started = {
        "full": start_node(root, ["--maxmemory", "1", "--maxmemory-policy", "noeviction"]),
        "replica": start_node(root, ["--replicaof", HOST, str(free_port())]),
    }
    yield started
    for node in started.values():
        node.stop()


def node_url(node: Node) -> str:
    return f"redis://{HOST}:{node.port}/0"


@pytest.mark.real_redis
def test_a_full_server_refuses_a_push_as_a_full_queue(nodes: dict[str, Node]) -> None:
    producer = gq.Producer("full", url=node_url(nodes["full"]))
    with pytest.raises(gq.QueueFullError):
        producer.perform(b"x")
    with pytest.raises(gq.QueueFullError):
        producer.perform_many([b"a", b"b"])


@pytest.mark.real_redis
def test_a_replica_refusing_a_scripts_write_means_not_now(nodes: dict[str, Node]) -> None:
    queue = RedisQueue(client_from_url(node_url(nodes["replica"])), "replica")
    with pytest.raises(redis.ResponseError) as refused:
        queue.push([("j1", b"message")])
    assert "read only replica" in str(refused.value)
    assert not base.is_refusal(refused.value)  # the acker sends again, after a failover
