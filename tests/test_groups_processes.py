"""Groups across real worker processes (SPEC section 17): a concurrency limit per group
holds over three ``gq-worker`` processes, and a SIGKILLed worker under a group limit gives
its capacity back once its jobs are recovered."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import gq
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue
from tests.cli_support import env_for
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.test_cli_processes import FAST, LAUNCHER, Supervised

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_groupprocs_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def _enqueue(redis_server: RedisServer, queue: str, groups: dict[str, int], seconds: float) -> None:
    entries = [(f"{group}-{i}", gq.job.encode(gq.Job(f"{group}-{i}", str(seconds).encode())),
                0.0, group) for group, count in groups.items() for i in range(count)]  # fmt: skip
    assert all(push_group(RedisQueue(redis_server.client(), queue), "now", entries))


def _peaks(redis_server: RedisServer, queue: str) -> dict[str, int]:
    peaks = redis_server.client().hgetall(f"{queue}:test:peaks")
    return {group.decode(): int(n) for group, n in peaks.items()}


def _workers(tmp_path: Path, redis_server: RedisServer, queue: str, processes: int) -> Supervised:
    return Supervised(tmp_path, LAUNCHER, "tests.group_handlers:per_group", "--processes",
                      str(processes), "--queue", queue, "--concurrency", "20", *FAST,
                      env=env_for(redis_server.url, queue, redis_server.url))  # fmt: skip


def test_a_group_limit_holds_over_three_worker_processes(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    flow = gq.Queue(queue, client=redis_server.client())
    flow.set_group_limits(concurrency=2)
    flow.set_group_limits(concurrency=4, group="big")
    _enqueue(redis_server, queue, {"big": 40, "a": 12, "b": 12}, 0.1)
    workers = _workers(tmp_path, redis_server, queue, 3)
    client = redis_server.client()
    try:
        wait_until(lambda: client.llen(f"{queue}:test:done") == 64, 90)
    finally:
        workers.stop()
    assert _peaks(redis_server, queue) == {"big": 4, "a": 2, "b": 2}  # held, and reached


def test_a_sigkilled_worker_gives_its_group_capacity_back(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    flow = gq.Queue(queue, client=redis_server.client())
    flow.set_group_limits(concurrency=3)
    _enqueue(redis_server, queue, {"t": 12}, 0.5)
    workers = _workers(tmp_path, redis_server, queue, 1)
    client = redis_server.client()
    running, peaks = f"{queue}:test:running:t", f"{queue}:test:peaks"
    try:
        (child,) = workers.wait_children(1)
        wait_until(lambda: client.scard(running) == 3, 20)  # the group's limit, held
        os.kill(child, signal.SIGKILL)  # its 3 jobs stay in flight until recovered
        workers.wait_children(1)  # the supervisor starts a new one
        client.delete(running, peaks)  # forget the killed handlers
        wait_until(lambda: client.llen(f"{queue}:test:done") >= 12, 60)
        wait_until(lambda: flow.groups()["waiting_groups"] == 0, 10)
    finally:
        workers.stop()
    assert _peaks(redis_server, queue) == {"t": 3}  # the whole limit again after the crash
    assert not client.hgetall(f"{queue}:groups:of")  # nothing held is left counted
