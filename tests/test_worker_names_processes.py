"""Worker names with real ``gq-worker`` processes (issue 32, item 1): a SIGKILLed worker
restarted under its name takes its jobs back at once, so the tenant it held at its limit is
served again long before the lease ends; a second live worker with the name refuses to
start; two workers of one host without ``--name`` take two names."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import gq
from tests.cli_support import Worker, env_for
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.test_groups_processes import _enqueue

pytestmark = pytest.mark.timeout(60)  # the test fails long before a 120 s lease ends

# A lease of 120 s, twice the test's limit: only the name can bring the jobs back in time.
LONG_LEASE = ("--heartbeat-poll-interval", "60", "--custodian-consumer-timeout", "60",
              "--poller-poll-duration", "0.5", "--stats-interval", "0")  # fmt: skip


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_names_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def _worker(tmp_path: Path, redis_server: RedisServer, queue: str, *args: str) -> Worker:
    env = env_for(redis_server.url, queue, redis_server.url)
    return Worker(tmp_path, "tests.group_handlers:per_group", "--queue", queue, *LONG_LEASE,
                  *args, env=env)  # fmt: skip


def _names(redis_server: RedisServer, queue: str) -> set[str]:
    client = redis_server.client()
    facts = [client.get(key) for key in client.scan_iter(f"{queue}:facts:*")]
    return {json.loads(f)["name"] for f in facts if f is not None}


def test_a_worker_restarted_under_its_name_serves_a_tenant_at_its_limit_at_once(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    client = redis_server.client()
    gq.Queue(queue, client=client).set_group_limits(concurrency=2, group="t")
    _enqueue(redis_server, queue, {"t": 4}, 1.0)
    first = _worker(tmp_path, redis_server, queue, "--name", "web")
    running = f"{queue}:test:running:t"
    wait_until(lambda: client.scard(running) == 2, 20)  # the tenant at its limit
    (predecessor,) = [key for key in client.zrange(f"{queue}:consumers", 0, -1)]
    first.proc.kill()
    first.wait()
    client.delete(running, f"{queue}:test:peaks")  # forget the killed handlers
    second = _worker(tmp_path, redis_server, queue, "--name", "web")
    try:
        done = f"{queue}:test:done"
        wait_until(lambda: client.llen(done) >= 4 or second.proc.poll() is not None, 40,
                   message=f"4 jobs done; the first worker:\n{first.output}")  # fmt: skip
        assert client.llen(done) >= 4, second.output
    finally:
        second.stop()
    assert "took over the name 'web'" in second.output
    assert "recovered its 2 job(s) in flight" in second.output
    assert client.zscore(f"{queue}:consumers", predecessor) is None
    assert client.hgetall(f"{queue}:test:peaks") == {b"t": b"2"}  # the limit held


def test_a_second_live_worker_with_the_name_refuses_to_start(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    first = _worker(tmp_path, redis_server, queue, "--name", "web")
    try:
        first.wait_for_output("named 'web'")
        second = _worker(tmp_path, redis_server, queue, "--name", "web")
        assert second.wait() == 2
        assert "used by a live worker (host" in second.output
        assert f"pid {first.proc.pid}" in second.output
        assert first.proc.poll() is None
        assert _names(redis_server, queue) == {"web"}  # the refused one left no facts
        assert redis_server.client().zcard(f"{queue}:consumers") == 1
    finally:
        first.stop()


def test_workers_of_one_host_without_a_name_take_the_next_free_index(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    first = _worker(tmp_path, redis_server, queue)
    second = None
    try:
        first.wait_for_output("named '")
        second = _worker(tmp_path, redis_server, queue)
        second.wait_for_output("named '")
        names = _names(redis_server, queue)
        assert len(names) == 2
        assert {name.rsplit("-", 1)[1] for name in names} == {"0", "1"}
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_bad_name_is_refused_with_exit_2(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    worker = _worker(tmp_path, redis_server, queue, "--name", "a b")
    assert worker.wait() == 2
    assert "a worker's name is 1 to 100 letters" in worker.output
