"""What operators see during an incident (issue 19, section 3): facts and history that
move within seconds, and a consumer whose heartbeat is overdue shown as silent, with its
jobs in flight and when they will be recovered (``gq.Queue.consumers``)."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gq
from gq.options import ConsumerOptions
from gq.store.jobs import RedisQueue
from gq.worker.facts import REPORT_SECONDS
from tests.cli_support import Worker, env_for
from tests.helpers import Backend, RedisServer, delete_keys, wait_until
from tests.test_facts import history_totals, stored_facts


@pytest.mark.timeout(60)
def test_facts_and_history_tell_the_counts_within_seconds_not_at_the_heartbeat(
    backend: Backend, start: Any
) -> None:
    consumer, _ = start(lambda job: None)  # heartbeat every 60 s (the default)
    direct = backend.direct()
    wait_until(lambda: stored_facts(direct, backend.queue, consumer.id), 10)
    gq.Producer(backend.queue, client=direct).perform_many([b""] * 7)
    wait_until(lambda: consumer.stats.done == 7, 10)
    done = time.monotonic()

    def fresh() -> bool:
        facts = stored_facts(direct, backend.queue, consumer.id) or {}
        return facts.get("jobs_done") == 7 and history_totals(direct, backend.queue)["done"] == 7

    wait_until(fresh, REPORT_SECONDS + 5)
    assert time.monotonic() - done <= REPORT_SECONDS + 2  # the report interval, not 60 s
    facts = stored_facts(direct, backend.queue, consumer.id) or {}
    lease = consumer.opts.heartbeat_poll_interval + consumer.opts.custodian_consumer_timeout
    assert facts["report_interval"] == REPORT_SECONDS and facts["lease_seconds"] == lease
    [entry] = gq.Queue(backend.queue, client=direct).consumers()
    assert entry["id"] == consumer.id and not entry["silent"]
    assert entry["silent_for"] < REPORT_SECONDS + 2


def test_a_consumer_without_facts_is_silent_past_the_timeout(backend: Backend) -> None:
    direct = backend.direct()
    rq = RedisQueue(direct, backend.queue)
    gq.Producer(backend.queue, client=direct).perform_many([b""] * 2)
    rq.register("old")  # a curlyq consumer: no facts
    assert len(rq.fetch("old", 2)) == 2
    now = rq.server_time()
    direct.zadd(rq.keys.consumers, {rq.keys.inflight("old"): now - 100})
    [entry] = gq.Queue(backend.queue, client=direct).consumers(consumer_timeout=30)
    assert (entry["id"], entry["in_flight"], entry["facts"]) == ("old", 2, None)
    assert entry["silent"] and entry["silent_for"] >= 100
    assert entry["recover_at"] == pytest.approx(now - 100 + 30)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_incident_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.mark.timeout(90)
def test_a_killed_worker_shows_silent_with_its_jobs_to_be_recovered(
    redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    gq.Producer(queue, client=client).perform_many([b""] * 3)
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    worker = Worker(tmp_path, "tests.handlers:hang", "--concurrency", "3", env=env)
    try:
        view = gq.Queue(queue, client=client)
        wait_until(lambda: client.llen(f"{queue}:test:started") == 3, 40)
        wait_until(lambda: (view.consumers() or [{}])[0].get("facts"), 10)
        [alive] = view.consumers()
        assert not alive["silent"] and alive["in_flight"] == 3
        worker.signal(signal.SIGKILL)
        worker.wait()
        killed = time.monotonic()
        wait_until(lambda: view.consumers()[0]["silent"], 2 * REPORT_SECONDS + 10)
        # Its heartbeat interval (or two report intervals) and the slack: seconds, not the
        # lease.
        assert time.monotonic() - killed <= 2 * REPORT_SECONDS + 5
        [silent] = view.consumers()
        lease = ConsumerOptions.heartbeat_poll_interval + ConsumerOptions.custodian_consumer_timeout
        assert silent["in_flight"] == 3 and silent["facts"]["lease_seconds"] == lease
        assert silent["recover_at"] == pytest.approx(silent["heartbeat_at"] + lease)
        assert silent["silent_for"] >= ConsumerOptions.heartbeat_poll_interval
    finally:
        worker.stop()
