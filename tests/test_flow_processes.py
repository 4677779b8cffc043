"""Flow control across real worker processes (issue #11): a concurrency limit holds over
several ``gq-worker`` processes, and a SIGKILLed worker does not shrink it once its jobs
are recovered."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import gq
from tests.cli_support import env_for
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.test_cli_processes import FAST, LAUNCHER, Supervised

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_flowprocs_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def _enqueue(redis_server: RedisServer, queue: str, count: int, seconds: float) -> None:
    producer = gq.Producer(queue, client=redis_server.client())
    producer.perform_many([gq.Job(id=f"j{i}", data=str(seconds).encode()) for i in range(count)])


def _count(redis_server: RedisServer, key: str) -> int:
    return int(redis_server.client().get(key) or 0)


def test_a_concurrency_limit_holds_over_three_worker_processes(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    gq.Queue(queue, client=redis_server.client()).set_limits(concurrency=6)
    _enqueue(redis_server, queue, 60, 0.1)
    workers = Supervised(tmp_path, LAUNCHER, "tests.handlers:concurrent", "--processes", "3",
                         "--queue", queue, "--concurrency", "20", *FAST,
                         env=env_for(redis_server.url, queue, redis_server.url))  # fmt: skip
    client = redis_server.client()
    try:
        wait_until(lambda: client.llen(f"{queue}:test:done") == 60, 60)
    finally:
        workers.stop()
    peak = _count(redis_server, f"{queue}:test:peak")
    assert 5 <= peak <= 6, peak  # held by the limit, and close to it


def test_a_sigkilled_worker_does_not_shrink_the_limit(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    flow = gq.Queue(queue, client=redis_server.client())
    flow.set_limits(concurrency=4)
    _enqueue(redis_server, queue, 16, 0.5)
    workers = Supervised(tmp_path, LAUNCHER, "tests.handlers:concurrent", "--processes", "1",
                         "--queue", queue, "--concurrency", "10", *FAST,
                         env=env_for(redis_server.url, queue, redis_server.url))  # fmt: skip
    client = redis_server.client()
    running, peak = f"{queue}:test:running", f"{queue}:test:peak"
    try:
        (child,) = workers.wait_children(1)
        wait_until(lambda: client.scard(running) == 4, 20)  # the limit's worth, held
        os.kill(child, signal.SIGKILL)  # its 4 jobs stay in flight until recovered
        workers.wait_children(1)  # the supervisor starts a new one
        client.delete(running, peak)  # forget the killed handlers
        wait_until(lambda: client.llen(f"{queue}:test:done") >= 16, 60)
        wait_until(lambda: flow.stats()["held"] == 0, 10)
    finally:
        workers.stop()
    assert _count(redis_server, peak) == 4  # the whole limit again, not 4 minus the crash
