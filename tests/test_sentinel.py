"""gq behind Redis Sentinel: a real master, replica and sentinel (``redis-server
--sentinel``), a failover while a worker runs, and the CLI with a sentinel URL."""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest
import redis

import gq
from gq.store.connection import client_from_url
from tests.cli_support import ADMIN, WORKER, env_for, run
from tests.helpers import wait_until
from tests.queue_sides import BothSides
from tests.test_cluster import Runner
from tests.topologies import SentinelSetup, start_sentinel


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSetup]:
    setup = start_sentinel(tmp_path_factory.mktemp("sentinel"))
    try:
        yield setup
    finally:
        setup.stop()


def test_a_sentinel_url_reaches_the_master(sentinel: SentinelSetup) -> None:
    client = client_from_url(sentinel.url)
    try:
        assert client.info("replication")["role"] == "master"
        assert client.connection_pool.connection_kwargs["retry"].get_retries() == 0
    finally:
        client.close()
    with pytest.raises(gq.ConfigurationError, match="service name"):
        client_from_url(sentinel.url.rsplit("/", 2)[0] + "/")


def test_producer_and_worker_on_a_sentinel_url(sentinel: SentinelSetup, tmp_path: Path) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    producer = gq.Producer(queue, url=sentinel.url)
    try:
        producer.perform_many([b"a", b"b"])
        stats = run(ADMIN, "stats", "--queue", queue, env=env_for(sentinel.url, None))
        assert stats.returncode == 0, stats.stderr
        worker = run(WORKER, "builtins:id", "--queue", queue, "--burst",
                     env=env_for(sentinel.url, None), timeout=30)  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        assert BothSides(producer._queue.client, queue).counts()["ready"] == 0
    finally:
        BothSides(producer._queue.client, queue).delete_queue()
        producer.close()


@pytest.mark.timeout(90)
def test_workers_continue_after_a_sentinel_failover(sentinel: SentinelSetup) -> None:
    """SIGKILL the master; the sentinel promotes the replica and the worker goes on.

    As on a cluster, replication is asynchronous: writes the old master acknowledged
    but had not yet sent to the replica are lost (jobs enqueued then: lost; acks: the
    job runs again).
    """
    queue = f"q-{uuid.uuid4().hex[:8]}"
    seen: collections.Counter[bytes] = collections.Counter()
    runner = Runner(queue, sentinel.url, seen)
    producer = gq.Producer(queue, url=sentinel.url)
    enqueued: list[bytes] = []
    refused = 0

    def enqueue(n: int) -> None:
        nonlocal refused
        for _ in range(n):
            data = f"job-{len(enqueued) + refused}".encode()
            try:
                producer.perform(data)
                enqueued.append(data)
            except (redis.RedisError, gq.GQError):
                refused += 1
                gevent.sleep(0.1)
            gevent.sleep(0.002)

    try:
        old = sentinel.master_port()
        enqueue(200)
        wait_until(lambda: len(seen) >= 150, 20, 0.05, "jobs run before the failover")
        sentinel.master.kill()
        mover = gevent.spawn(enqueue, 100)
        wait_until(lambda: sentinel.master_port() != old, 40, 0.1, "the replica promoted")
        mover.join(timeout=40)
        enqueue(100)
        after = enqueued[-100:]
        wait_until(lambda: set(after) <= set(seen), 40, 0.1, "jobs enqueued after failover")
        lost = [data for data in enqueued if data not in seen]
        duplicated = {data: n for data, n in seen.items() if n > 1}
        print(
            f"\nsentinel failover: enqueued={len(enqueued)} refused={refused} run={len(seen)} "
            f"lost={len(lost)} duplicated={len(duplicated)} "
            f"worker_restarts={[type(e).__name__ for e in runner.fatal]}"
        )
        assert len(lost) <= 50, lost
    finally:
        runner.stop()
        try:
            BothSides(producer._queue.client, queue).delete_queue()
        finally:
            producer.close()
