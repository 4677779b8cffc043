"""Where gq must be better than curlyq (SPEC section 6): each test fails on curlyq's behaviour."""

import contextlib
import os
import subprocess
import sys
import time
import types
import uuid

import gevent
import msgpack
import pytest

import gq
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests import queue_state as state
from tests.helpers import wait_until

# -- bad data ------------------------------------------------------------------------------


def test_a_garbage_or_missing_message_never_stalls_the_consumer_nor_fails_its_batch(backend, start):
    direct = backend.direct()
    keys = QueueKeys(backend.queue)
    good = [gq.Job(id=f"good-{i}", data=b"ok") for i in range(3)]
    state.enqueue_raw(direct, backend.queue, good)
    # One fetched batch: good, garbage, good, missing, wrong id, good.
    direct.hset(
        keys.data,
        mapping={
            "garbage": b"\xc1\xc1 not msgpack",
            "liar": msgpack.packb({"ID": "other", "Data": b"", "Attempt": 0}),
        },
    )
    direct.delete(keys.active)
    direct.rpush(keys.active, "good-0", "garbage", "good-1", "missing", "liar", "good-2")
    done = []
    consumer, greenlet = start(lambda job: done.append(job.id), poller_buffer_size=10)

    wait_until(lambda: sorted(done) == ["good-0", "good-1", "good-2"])
    wait_until(lambda: set(state.dead(direct, backend.queue)) == {"garbage", "liar"})
    assert (
        state.message(direct, backend.queue, "garbage") == b"\xc1\xc1 not msgpack"
    )  # kept for a human
    wait_until(lambda: state.inflight(direct, backend.queue, consumer.id) == set())
    assert state.active(direct, backend.queue) == []
    assert not greenlet.dead  # still consuming
    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform(gq.Job(id="after", data=b""))
    wait_until(lambda: "after" in done)


# -- hung handlers -------------------------------------------------------------------------


def test_a_hung_handler_is_a_failed_attempt_after_job_timeout(backend, start):
    def handler(job):
        if job.id == "hung":
            # The timeout is a BaseException: this cannot swallow it.
            with contextlib.suppress(Exception):
                gevent.sleep(3600)
        done.append(job.id)

    done = []
    direct = backend.direct()
    state.enqueue_raw(direct, backend.queue, [gq.Job(id="hung"), gq.Job(id="fine")])
    start(handler, job_timeout=0.3)

    wait_until(lambda: "hung" in state.scheduled(direct, backend.queue))
    message = state.message(direct, backend.queue, "hung")
    assert gq.job.decode(message).attempt == 1
    assert "JobTimeout" in gq.job.decode_error(message)
    assert "fine" in done and "hung" not in done


# -- bounded dead set ------------------------------------------------------------------------


def _kill(queue, direct, job_id, **limits):
    direct.sadd(queue.keys.inflight("c1"), job_id)
    direct.hset(queue.keys.data, job_id, gq.job.encode(gq.Job(id=job_id)))
    assert queue.kill("c1", job_id, gq.job.encode(gq.Job(id=job_id, attempt=1)), **limits)


def test_the_dead_set_is_trimmed_to_its_size_and_trimmed_ids_become_free(backend):
    queue = RedisQueue(backend.client(), backend.queue)
    direct = backend.direct()
    for i in range(5):
        _kill(queue, direct, f"d{i}", dead_max_jobs=3, dead_max_age=1e9)
    assert set(state.dead(direct, backend.queue)) == {"d2", "d3", "d4"}
    assert state.message(direct, backend.queue, "d0") is None
    producer = gq.Producer(backend.queue, client=backend.client())
    assert producer.perform(gq.Job(id="d0")) == "d0"
    with pytest.raises(gq.JobAlreadyExistsError):
        producer.perform(gq.Job(id="d4"))


def test_dead_jobs_older_than_the_max_age_are_dropped(backend):
    queue = RedisQueue(backend.client(), backend.queue)
    direct = backend.direct()
    old = state.server_time(direct) - 1000
    direct.zadd(queue.keys.dead, {"ancient": old})
    direct.hset(queue.keys.data, "ancient", b"m")
    _kill(queue, direct, "fresh", dead_max_jobs=100, dead_max_age=500.0)
    assert set(state.dead(direct, backend.queue)) == {"fresh"}
    assert state.message(direct, backend.queue, "ancient") is None


# -- clock skew ----------------------------------------------------------------------------


def skew_clock(monkeypatch, backend, seconds):
    """Move this process's wall clock by ``seconds``, the server's staying put.

    On a real Redis the whole process's ``time.time`` moves, which catches any use of the
    local clock anywhere. fakeredis runs in this process and reads that same clock for
    TIME, so there only gq's own modules get the skewed clock.
    """
    real_time = time.time
    skewed = types.SimpleNamespace(
        **{n: getattr(time, n) for n in dir(time) if not n.startswith("_")}
    )
    skewed.time = lambda: real_time() + seconds
    if backend.kind == "real":
        monkeypatch.setattr(time, "time", skewed.time)
    for name, module in list(sys.modules.items()):
        if name.startswith("gq") and getattr(module, "time", None) is time:
            monkeypatch.setattr(module, "time", skewed)


@pytest.mark.parametrize("skew", [+300.0, -300.0])
def test_a_worker_clock_minutes_off_neither_reaps_live_consumers_nor_is_reaped(
    backend, monkeypatch, skew
):
    direct = backend.direct()
    live = gq.Consumer(backend.queue, client=backend.client())
    skewed = gq.Consumer(backend.queue, client=backend.client())
    live._queue.register(live.id)
    direct.sadd(live.inflight_key, "running")
    direct.hset(QueueKeys(backend.queue).data, "running", b"m")
    skew_clock(monkeypatch, backend, skew)

    skewed.heartbeat_step()
    skewed.custodian_step()
    live.custodian_step()

    assert state.inflight(direct, backend.queue, live.id) == {"running"}
    consumers = direct.zrange(QueueKeys(backend.queue).consumers, 0, -1, withscores=True)
    assert {key.decode() for key, _ in consumers} == {live.inflight_key, skewed.inflight_key}
    for _, score in consumers:  # heartbeats carry the server's time, whatever the host says
        assert abs(score - state.server_time(direct)) < 10


def test_retry_delays_are_counted_on_the_servers_clock(backend, monkeypatch):
    queue = RedisQueue(backend.client(), backend.queue)
    direct = backend.direct()
    direct.sadd(queue.keys.inflight("c1"), "a")
    skew_clock(monkeypatch, backend, 3600)
    queue.retry("c1", "a", b"m", 10.0)
    assert abs(state.scheduled(direct, backend.queue)["a"] - (state.server_time(direct) + 10)) < 5


# -- poison jobs: real processes --------------------------------------------------------------

WORKER = """
from gevent import monkey; monkey.patch_all()
import os, sys, redis, gq
url, queue = sys.argv[1], sys.argv[2]
consumer = gq.Consumer(queue, url=url, processor_concurrency=1, poller_buffer_size=1)
consumer.opts.heartbeat_poll_interval = 0.2
consumer.opts.custodian_consumer_timeout = 0.3
consumer.opts.custodian_poll_interval = 0.1
consumer.opts.poller_poll_duration = 0.2
done = redis.Redis.from_url(url)
def handle(job):
    if job.data == b"poison":
        os._exit(17)  # what an OOM kill or a segfault looks like from Redis
    done.rpush(queue + ":test:done", job.id)
consumer.consume(handle)
"""


@pytest.mark.timeout(120)
def test_a_job_that_kills_its_worker_again_and_again_ends_in_dead(redis_server, tmp_path):
    queue = f"poison_{uuid.uuid4().hex[:8]}"
    client = redis_server.client()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    producer = gq.Producer(queue, url=redis_server.url)
    producer.perform(gq.Job(id="poison", data=b"poison"))
    crashes = 0
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    try:
        # curlyq recovers the job forever: each new worker would run it and die.
        while "poison" not in state.dead(client, queue):
            assert crashes <= 4, "the poison job was not sent to dead after 3 recoveries"
            worker = subprocess.Popen(
                [sys.executable, str(script), redis_server.url, queue], env=env
            )
            try:
                wait_until(
                    lambda w=worker: w.poll() is not None or "poison" in state.dead(client, queue),
                    timeout=30,
                )
            finally:
                if worker.poll() is None:
                    worker.terminate()
                    worker.wait(10)
            crashes += worker.returncode == 17
        assert crashes == 4  # the first run and three recoveries
        reason = gq.job.decode_error(state.message(client, queue, "poison"))
        assert "recovered 3 times" in reason
        # The queue still works: a normal job after the poison one completes.
        producer.perform(gq.Job(id="normal", data=b"fine"))
        worker = subprocess.Popen([sys.executable, str(script), redis_server.url, queue], env=env)
        try:
            wait_until(
                lambda: client.lrange(queue + ":test:done", 0, -1) == [b"normal"], timeout=30
            )
        finally:
            worker.terminate()
            assert worker.wait(10) == 0
    finally:
        for key in client.scan_iter(match=f"{queue}*"):
            client.delete(key)
