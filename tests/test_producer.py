"""The Producer side: perform, perform_at, perform_after, perform_many, dedup, id reuse."""

import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone

import pytest

import gq
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests import queue_state as state


@pytest.fixture
def producer(backend):
    return gq.Producer(backend.queue, client=backend.client())


def test_perform_stores_the_message_queues_the_id_and_raises_the_signal(backend, producer):
    job_id = producer.perform(b"payload")
    direct = backend.direct()
    assert state.active(direct, backend.queue) == [job_id]
    assert gq.job.decode(state.message(direct, backend.queue, job_id)) == gq.Job(
        job_id, b"payload", 0
    )
    assert state.signal(direct, backend.queue) == [b"1"]


def test_every_perform_records_when_the_job_is_ready_for_gq_stats(backend, producer):
    direct = backend.direct()
    before = time.time()
    now_id = producer.perform(b"a")
    [many_id] = producer.perform_many([b"b"])
    at_id = producer.perform_at(2_000_000_000, b"c")
    after_id = producer.perform_after(60, b"d")
    ready = {
        job_id: gq.job.decode_ready_at(state.message(direct, backend.queue, job_id))
        for job_id in (now_id, many_id, at_id, after_id)
    }
    assert before <= ready[now_id] <= time.time()
    assert before <= ready[many_id] <= time.time()
    assert ready[at_id] == 2_000_000_000
    assert before + 60 <= ready[after_id] <= time.time() + 60


def test_perform_keeps_the_given_id_and_attempt(backend, producer):
    assert producer.perform(gq.Job(id="abc", data=b"xyz", attempt=2)) == "abc"
    raw = state.message(backend.direct(), backend.queue, "abc")
    assert gq.job.decode(raw) == gq.Job("abc", b"xyz", 2)


def test_a_duplicate_id_raises_and_changes_nothing(backend, producer):
    producer.perform(gq.Job(id="dup", data=b"first"))
    with pytest.raises(gq.JobAlreadyExistsError) as caught:
        producer.perform(gq.Job(id="dup", data=b"second"))
    assert caught.value.job.id == "dup"
    assert caught.value.job.data == b"second"
    direct = backend.direct()
    assert state.active(direct, backend.queue) == ["dup"]
    assert gq.job.decode(state.message(direct, backend.queue, "dup")).data == b"first"


@pytest.mark.parametrize("where", ["scheduled", "dead", "inflight"])
def test_an_id_stays_taken_wherever_the_job_is(backend, producer, where):
    producer.perform_after(60, gq.Job(id="x", data=b"1"))
    if where != "scheduled":
        direct = backend.direct()
        keys = QueueKeys(backend.queue)
        direct.zrem(keys.scheduled, "x")
        if where == "dead":
            direct.zadd(keys.dead, {"x": 1.0})
        else:
            direct.sadd(keys.inflight("c1"), "x")
    with pytest.raises(gq.JobAlreadyExistsError):
        producer.perform(gq.Job(id="x", data=b"2"))


def test_an_id_can_be_reused_once_the_job_is_acknowledged(backend, producer):
    queue = RedisQueue(backend.client(), backend.queue)
    producer.perform(gq.Job(id="again", data=b"1"))
    queue.register("c1")
    assert [job_id for job_id, _ in queue.fetch("c1", 10)] == ["again"]
    assert queue.ack("c1", ["again"]) == [True]
    assert producer.perform(gq.Job(id="again", data=b"2")) == "again"
    assert state.active(backend.direct(), backend.queue) == ["again"]


def test_perform_at_schedules_at_the_callers_absolute_time(backend, producer):
    when = datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    first = producer.perform_at(when, b"a")
    second = producer.perform_at(1_900_000_000.25, b"b")
    direct = backend.direct()
    assert state.scheduled(direct, backend.queue) == {
        first: when.timestamp(),
        second: 1_900_000_000.25,
    }
    assert state.active(direct, backend.queue) == []


def test_perform_after_adds_the_delay_to_the_servers_clock(backend, producer):
    direct = backend.direct()
    before = state.server_time(direct)
    job_id = producer.perform_after(timedelta(minutes=5), b"a")
    after = state.server_time(direct)
    score = state.scheduled(direct, backend.queue)[job_id]
    assert before + 300 <= score <= after + 300


def test_perform_many_queues_every_job_in_order_with_one_signal(backend, producer):
    # 2,500 jobs span several script calls (at most 1,000 per call) in one pipeline.
    payloads = [b"job-%d" % i for i in range(2500)]
    ids = producer.perform_many([*payloads[:-1], gq.Job(id="last", data=payloads[-1])])
    direct = backend.direct()
    assert len(ids) == 2500 and ids[-1] == "last"
    assert state.active(direct, backend.queue) == ids
    assert state.signal(direct, backend.queue) == [b"1"]
    assert gq.job.decode(state.message(direct, backend.queue, ids[1234])).data == b"job-1234"


def test_perform_many_stores_the_new_jobs_and_reports_the_duplicates(backend, producer):
    producer.perform(gq.Job(id="taken", data=b"old"))
    batch = [
        gq.Job(id="a", data=b"1"),
        gq.Job(id="taken", data=b"new"),
        gq.Job(id="b", data=b"2"),
        gq.Job(id="a", data=b"again"),
    ]
    with pytest.raises(gq.JobAlreadyExistsError) as caught:
        producer.perform_many(batch)
    assert [job.id for job in caught.value.duplicates] == ["taken", "a"]
    assert caught.value.job.id == "taken"
    assert state.active(backend.direct(), backend.queue) == ["taken", "a", "b"]


def test_perform_many_of_nothing_returns_nothing(producer):
    assert producer.perform_many([]) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.perform("text"),
        lambda p: p.perform_many([b"ok", 5]),
        lambda p: p.perform_after(-1, b"x"),
        lambda p: p.perform_after("soon", b"x"),
        lambda p: p.perform_at(float("inf"), b"x"),
    ],
)
def test_bad_input_gets_a_clear_error_and_stores_nothing(backend, producer, call):
    with pytest.raises((TypeError, gq.ConfigurationError)):
        call(producer)
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_construction_needs_a_queue_and_a_url_or_client(backend):
    with pytest.raises(gq.ConfigurationError):
        gq.Producer("q")
    with pytest.raises(gq.ConfigurationError):
        gq.Producer("", client=backend.client())
    with pytest.raises(gq.ConfigurationError):
        gq.Producer("q", url="http://localhost")


def test_a_client_wins_over_a_url(backend):
    producer = gq.Producer(
        backend.queue, url="redis://no-such-host.invalid:1/0", client=backend.client()
    )
    assert producer.perform(b"x")


def test_a_client_that_decodes_responses_is_refused(backend):
    with pytest.raises(gq.ConfigurationError, match="decode_responses"):
        gq.Producer(backend.queue, client=backend.client(decode_responses=True))


def test_the_producer_works_in_a_plain_threaded_program(redis_server, tmp_path):
    # A web app is not monkey-patched: the Producer must not need gevent's patching.
    script = textwrap.dedent(
        f"""
        import threading, gevent.monkey, gq, redis
        assert not gevent.monkey.is_module_patched("socket")
        producer = gq.Producer("{tmp_path.name}-plain", url="{redis_server.url}")
        threads = [threading.Thread(target=lambda: [producer.perform(b"x") for _ in range(50)])
                   for _ in range(4)]
        [t.start() for t in threads]; [t.join() for t in threads]
        print(redis.Redis.from_url("{redis_server.url}").llen("{tmp_path.name}-plain:active"))
        """
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "200"
    finally:
        redis_server.client().delete(
            *[f"{tmp_path.name}-plain:{k}" for k in ("active", "data", "signal")]
        )


def test_a_consumer_without_monkey_patching_fails_at_once_saying_how_to_fix_it():
    script = textwrap.dedent(
        """
        import gq
        consumer = gq.Consumer("q", url="fakeredis://unpatched")
        try:
            consumer.run(lambda job: None)
        except gq.ConfigurationError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "patch_all()" in out.stdout and "gq-worker" in out.stdout


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("redis://:sekret@host:6380/1", "redis://:***@host:6380/1"),
        ("rediss://user:sekret@host/0", "rediss://user:***@host/0"),
        ("redis://host/0?db=1&password=sekret", "redis://host/0?db=1&password=***"),
        ("unix:///tmp/r.sock?password=sekret", "unix:///tmp/r.sock?password=***"),
    ],
)
def test_credentials_are_hidden_wherever_a_url_is_shown(url, shown):
    from gq.store.connection import redact_url

    assert redact_url(url) == shown
