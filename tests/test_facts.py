"""Worker facts, throughput history and the queue registry, as a running consumer writes
them (fakeredis and a real Redis), and ``gq consumers`` showing the facts."""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import pytest
import redis

import gq
from gq.options import UNSTATED_LEASE, ConsumerOptions
from gq.store.keys import REGISTRY
from gq.worker.facts import HISTORY_TTL, Reporter
from gq.worker.recorder import HISTORY_SECONDS, Recorder
from tests.cli_support import ADMIN, env_for, run
from tests.helpers import Backend, RedisServer, delete_keys, wait_until
from tests.queue_sides import BothSides

FACT_TYPES = {"id": str, "host": str, "pid": int, "started_at": float, "version": str,
              "queues": list, "concurrency": int, "running": int, "jobs_done": int,
              "jobs_failed": int, "jobs_retried": int, "jobs_dead": int, "rss_bytes": int,
              "cpu_percent": float,
              "updated_at": float, "heartbeat_at": float, "report_interval": float,
              "heartbeat_interval": float, "lease_seconds": float}  # fmt: skip


@pytest.fixture
def direct(backend: Backend) -> Iterator[redis.Redis]:
    client = backend.direct()
    yield client
    client.srem(REGISTRY, backend.queue)


def stored_facts(direct: redis.Redis, queue: str, consumer_id: str) -> dict[str, Any] | None:
    raw = direct.get(f"{queue}:facts:{consumer_id}")
    return None if raw is None else json.loads(raw)


def history_totals(direct: redis.Redis, queue: str) -> dict[str, int]:
    hour = int(time.time()) // 3600 * 3600
    fields = BothSides(direct, queue).history_fields([hour - 3600, hour])
    totals = {"done": 0, "failed": 0}
    for field, count in fields.items():
        kind, minute = field.split(":")
        assert int(minute) % 60 == 0 and time.time() - 7200 < int(minute) <= time.time()
        totals[kind] = totals.get(kind, 0) + count  # ("retried" only once a job retried)
    return totals


@pytest.mark.timeout(30)
def test_a_consumer_writes_its_facts_history_and_registry_entry(
    backend: Backend, direct: redis.Redis
) -> None:
    queue = backend.queue
    consumer = gq.Consumer(
        queue, client=backend.client(), processor_concurrency=3, job_max_attempts=0
    )
    consumer.opts.poller_poll_duration = 0.2
    gq.Producer(queue, client=direct).perform_many([b"ok"] * 5 + [b"fail"] * 2)

    def handler(job: gq.Job) -> None:
        if job.data == b"fail":  # job_max_attempts=0: killed at once
            raise RuntimeError("failed on purpose")

    runner = gevent.spawn(consumer.run, handler)
    try:
        # The first heartbeat, at the start, writes the facts.
        facts = wait_until(lambda: stored_facts(direct, queue, consumer.id), 10)
        assert {name: type(v) for name, v in facts.items()} == FACT_TYPES
        assert facts["id"] == consumer.id and facts["queues"] == [queue]
        assert facts["host"] == socket.gethostname() and facts["pid"] == os.getpid()
        assert facts["version"] == gq.__version__ and facts["concurrency"] == 3
        assert facts["rss_bytes"] > 1e6
        lease = consumer.opts.heartbeat_poll_interval + consumer.opts.custodian_consumer_timeout
        # They outlive the lease by curlyq's: a custodian reads the lease they state.
        ttl = direct.pttl(f"{queue}:facts:{consumer.id}")
        assert lease * 1000 < ttl <= (lease + UNSTATED_LEASE) * 1000
        assert queue.encode() in direct.smembers(REGISTRY)
        wait_until(
            lambda: direct.zcard(f"{queue}:dead") == 2 and not direct.llen(f"{queue}:active")
        )
        wait_until(lambda: consumer.recorder.totals["done"] == 5)
        consumer.heartbeat_step()  # what the next heartbeat writes
        facts = stored_facts(direct, queue, consumer.id)
        assert facts is not None and (facts["jobs_done"], facts["jobs_failed"]) == (5, 2)
        assert history_totals(direct, queue) == {"done": 5, "failed": 2}
    finally:
        consumer.stop()
        runner.get(timeout=10)
    # A graceful stop takes the facts away with the consumer.
    assert stored_facts(direct, queue, consumer.id) is None
    hour = int(time.time()) // 3600 * 3600
    ttls = [direct.ttl(f"{queue}:history:{h}") for h in (hour - 3600, hour)]
    assert any(HISTORY_TTL - 60 < ttl <= HISTORY_TTL for ttl in ttls), ttls


def test_the_last_counts_are_written_at_a_graceful_stop(
    backend: Backend, direct: redis.Redis
) -> None:
    queue = backend.queue
    consumer = gq.Consumer(queue, client=backend.client())
    consumer.opts.poller_poll_duration = 0.2
    gq.Producer(queue, client=direct).perform_many([b"a", b"b", b"c"])
    done: list[str] = []

    def handler(job: gq.Job) -> None:
        done.append(job.id)
        if len(done) == 3:
            consumer.stop()

    consumer.run(handler)  # the heartbeat ran only at the start: the stop wrote the counts
    assert history_totals(direct, queue) == {"done": 3, "failed": 0}


@pytest.mark.timeout(30)
def test_a_consumer_of_two_queues_counts_each_job_under_its_own_queue(
    backend: Backend, direct: redis.Redis
) -> None:
    # Issue #12 meets #10: the history and the facts' counts were all the first queue's.
    names = first, second = [f"{backend.queue}-a", f"{backend.queue}-b"]
    consumer = gq.Consumer(names, client=backend.client(), job_max_attempts=0)
    consumer.opts.poller_poll_duration = 0.2
    gq.Producer(first, client=direct).perform_many([b"ok"] * 2)
    gq.Producer(second, client=direct).perform_many([b"ok"] * 3 + [b"fail"])

    def handler(job: gq.Job) -> None:
        if job.data == b"fail":  # job_max_attempts=0: killed at once
            raise RuntimeError("failed on purpose")

    runner = gevent.spawn(consumer.run, handler)
    try:
        wait_until(lambda: direct.zcard(f"{second}:dead") == 1)
        wait_until(lambda: sum(r.totals["done"] for r in consumer.recorders.values()) == 5)
        consumer.heartbeat_step()
        assert history_totals(direct, first) == {"done": 2, "failed": 0}
        assert history_totals(direct, second) == {"done": 3, "failed": 1}
        facts = {name: stored_facts(direct, name, consumer.id) for name in names}
        for name, done, failed in ((first, 2, 0), (second, 3, 1)):
            assert facts[name] is not None and facts[name]["queues"] == names  # type: ignore[index]
            assert (facts[name]["jobs_done"], facts[name]["jobs_failed"]) == (done, failed)  # type: ignore[index]
        assert {first.encode(), second.encode()} <= direct.smembers(REGISTRY)
    finally:
        consumer.stop()
        runner.get(timeout=10)
        direct.srem(REGISTRY, *names)
    assert all(stored_facts(direct, name, consumer.id) is None for name in names)


def test_running_is_the_consumers_under_each_queue_and_the_cpu_read_once(
    backend: Backend,
) -> None:
    names = [f"{backend.queue}-a", f"{backend.queue}-b"]
    recorders = {name: Recorder(name) for name in names}

    queues = {name: BothSides(backend.client(), name) for name in names}
    reporter = Reporter(queues, "c1", ConsumerOptions(), recorders, "test",  # type: ignore[arg-type]
                        running=lambda: 4)  # fmt: skip
    readings: list[int] = []

    def usage() -> tuple[int, float]:
        readings.append(1)
        return 1, 2.0

    reporter._usage = usage  # type: ignore[method-assign]
    reporter.beat(time.time())
    assert len(readings) == 1  # psutil's CPU is since its last reading: a second is ~0
    for name in names:
        facts = json.loads(backend.direct().get(f"{name}:facts:c1"))
        assert facts["running"] == 4 and facts["cpu_percent"] == 2.0
    backend.direct().srem(REGISTRY, *names)


class FailingQueue:
    """A BothSides stand-in whose writes fail until ``healed``."""

    def __init__(self, real: BothSides) -> None:
        self.real = real
        self.keys = real.keys
        self.healed = False

    def report(self, *args: Any) -> Any:
        if not self.healed:
            raise redis.ConnectionError("Redis is away")
        return self.real.report(*args)


def test_counts_that_could_not_be_written_go_with_the_next_heartbeat(
    backend: Backend, direct: redis.Redis
) -> None:
    queue = FailingQueue(BothSides(backend.client(), backend.queue))
    recorder = Recorder(backend.queue)
    opts = ConsumerOptions()
    reporter = Reporter({backend.queue: queue}, "c1", opts, {backend.queue: recorder}, "test")  # type: ignore[dict-item]
    recorder.done(4)
    recorder.failed("retried")
    reporter.beat(time.time())  # logs a warning, does not raise
    recorder.done(1)
    queue.healed = True
    reporter.beat(time.time())
    assert history_totals(direct, backend.queue) == {"done": 5, "failed": 1, "retried": 1}
    assert recorder.history.pending == {}


def test_counts_older_than_the_history_are_dropped_when_given_back() -> None:
    recorder = Recorder("q")
    now_minute = int(time.time()) // 60 * 60
    stale = now_minute - HISTORY_SECONDS - 60
    recorder.history.restore({(stale, "done"): 3, (now_minute, "done"): 2})
    assert recorder.history.pending == {(now_minute, "done"): 2}


def test_history_minutes_follow_the_redis_servers_clock() -> None:
    recorder = Recorder("q")
    recorder.history.offset = 3 * 3600.0  # the server is 3 h ahead of this host
    recorder.done(1)
    [(minute, kind)] = recorder.history.pending
    assert kind == "done" and abs(minute - (time.time() + 3 * 3600)) < 120


# -- gq consumers ------------------------------------------------------------------------------


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[BothSides]:
    name = f"test_facts_{uuid.uuid4().hex[:8]}"
    yield BothSides(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")
    redis_server.client().srem(REGISTRY, name)


def test_gq_consumers_shows_each_consumers_facts(redis_server: RedisServer, rq: BothSides) -> None:
    rq.register("worker-a")
    recorder = Recorder(rq.keys.name)
    recorder.done(12)
    for outcome in ("retried", "retried", "retried", "killed"):  # 3 retries, 1 job to dead
        recorder.failed(outcome)
    reporter = Reporter(
        {rq.keys.name: rq}, "worker-a", ConsumerOptions(), {rq.keys.name: recorder}, "test"
    )
    reporter.beat(time.time())
    rq.register("curlyq-b")  # a consumer that writes no facts
    env = env_for(redis_server.url, rq.keys.name)

    result = run(ADMIN, "consumers", env=env)
    assert result.returncode == 0, result.stderr
    host, pid = re.escape(socket.gethostname()), os.getpid()
    version = re.escape(gq.__version__)
    # RUNNING 0, DONE 12, RETRIED 3, DEAD 1: retries are not failures (issue 32)
    line = rf"^worker-a\s+{host}\s+{pid}\s+{version}\s+0\s+12\s+3\s+1\s+\d+M\s+\d+%\s.*\s0\s+alive$"
    assert re.search(line, result.stdout, re.M), result.stdout
    assert "RETRIED" in result.stdout and "DEAD" in result.stdout and "FAILED" not in result.stdout
    assert re.search(r"^curlyq-b(\s+-){10}\s.*\s0\s+alive$", result.stdout, re.M), result.stdout

    result = run(ADMIN, "consumers", "--json", env=env)
    entries = {e["consumer"]: e for e in map(json.loads, result.stdout.splitlines())}
    assert entries["worker-a"]["host"] == socket.gethostname()
    assert entries["worker-a"]["jobs_done"] == 12 and entries["worker-a"]["rss_bytes"] > 1e6
    names = ("jobs_failed", "jobs_retried", "jobs_dead")
    counts = {name: entries["worker-a"][name] for name in names}
    assert counts == {"jobs_failed": 4, "jobs_retried": 3, "jobs_dead": 1}
    assert entries["curlyq-b"]["host"] is None and entries["curlyq-b"]["alive"]


def test_a_refused_write_gives_back_only_the_counts_that_did_not_land(
    redis_server: RedisServer, rq: BothSides
) -> None:
    # An ACL user limited to the queue's keys, without SET and (at first) without HINCRBY:
    # the registry and the facts are refused, and so are the increments, which must come
    # back; once HINCRBY is allowed they land exactly once, even though SET still fails.
    admin = redis_server.client()
    user = f"gq-facts-{uuid.uuid4().hex[:6]}"
    rule = dict(enabled=True, passwords=["+pw"], keys=[f"{rq.keys.name}*"], reset=True)
    admin.acl_setuser(user, commands=["+ping", "+sadd", "+expire"], **rule)
    try:
        limited = redis.Redis(
            host=redis_server.host, port=redis_server.port, db=redis_server.db,
            username=user, password="pw",
        )  # fmt: skip
        recorder = Recorder(rq.keys.name)
        name = rq.keys.name
        queues = {name: BothSides(limited, name)}
        reporter = Reporter(queues, "c1", ConsumerOptions(), {name: recorder}, "test")
        recorder.done(3)
        reporter.beat(time.time())
        assert sum(recorder.history.pending.values()) == 3  # refused: kept
        admin.acl_setuser(user, commands=["+ping", "+sadd", "+expire", "+hincrby"], **rule)
        reporter.beat(time.time())
        assert recorder.history.pending == {}
        reporter.beat(time.time())
        assert history_totals(admin, rq.keys.name) == {"done": 3, "failed": 0}
        assert admin.get(rq.keys.facts("c1")) is None  # SET refused, only logged
    finally:
        admin.acl_deluser(user)
