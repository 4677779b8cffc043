"""Every Redis error gq logs says what Redis said (issue #15, defect 13): with redis-py 8,
``repr(ResponseError)`` is only "server:ResponseError", so a WRONGTYPE warning said nothing."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import gq
from tests.cli_support import Worker, env_for, log_lines
from tests.helpers import Backend, RedisServer, delete_keys, wait_until

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def test_describe_gives_the_type_and_the_message() -> None:
    from gq.store.base import describe

    assert describe(redis.ResponseError(WRONGTYPE)) == f"ResponseError: {WRONGTYPE}"
    assert describe(redis.ConnectionError("Error 111\n  refused")) == (
        "ConnectionError: Error 111 refused"
    )
    assert describe(redis.TimeoutError()) == "TimeoutError"


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_logs_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def recorded(client: redis.Redis, queue: str) -> list[bytes]:
    return list(client.lrange(f"{queue}:test:done", 0, -1))


def test_a_worker_logs_the_wrongtype_message_of_a_refused_loop_step(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    """The dead set's key holds a string: each custodian pass is refused and logged with
    Redis's reason, and the worker keeps running jobs."""
    client = redis_server.client()
    client.set(f"{queue}:dead", "not a sorted set")
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    worker = Worker(tmp_path, "tests.handlers:record", "--custodian-poll-interval", "0.2", env=env)
    try:
        worker.wait_for_output("Custodian failed (1 in a row)")
        [line] = [line for line in log_lines(worker.output) if "failed (1 in a row)" in line]
        # tidy.lua checks the key's type itself, and says so.
        assert "ResponseError: " in line and f"{queue}:dead is a string, not a zset" in line
        job_id = gq.Producer(queue, client=client).perform(b"")
        wait_until(lambda: recorded(client, queue) == [job_id.encode()], 15, message="the job")
    finally:
        worker.stop()
    assert "server:ResponseError" not in worker.output


def test_a_wrongtype_key_at_start_is_a_clear_error_not_a_traceback(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    client = redis_server.client()
    client.set(f"{queue}:scheduled", "not a sorted set")
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    worker = Worker(tmp_path, "tests.handlers:record", env=env)
    assert worker.wait() == 3, worker.output
    assert f"ResponseError: {WRONGTYPE}" in worker.output
    assert "Traceback" not in worker.output


@pytest.mark.timeout(30)
def test_a_refused_facts_write_is_logged_with_its_message(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The history key of this hour holds a string: the counts written at the stop are
    refused, and the warning carries WRONGTYPE."""
    direct = backend.direct()
    hour = int(time.time()) // 3600 * 3600
    for start in (hour, hour + 3600):  # the test may cross an hour
        direct.set(f"{backend.queue}:history:{start}", "not a hash")
    gq.Producer(backend.queue, client=direct).perform(b"x")
    consumer = gq.Consumer(backend.queue, client=backend.client())
    consumer.opts.poller_poll_duration = 0.2
    caplog.set_level(logging.WARNING, logger="gq")
    consumer.run(lambda job: consumer.stop())
    [warning] = [r.getMessage() for r in caplog.records if "facts and history" in r.getMessage()]
    assert f"ResponseError: {WRONGTYPE}" in warning, warning
    direct.srem("gq:queues", backend.queue)
