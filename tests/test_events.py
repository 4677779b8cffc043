"""The opt-in stream of job events (issue 34): written by the scripts that change a job's
state, only when the change happened, capped, off by default, read from the library, the
asyncio iterator and ``gq events``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import gevent.event
import pytest

import gq
import gq.aio
import gq.events
from gq.events import Event
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests.cli_support import ADMIN, env_for, run
from tests.helpers import Backend, RedisServer, wait_until
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture

pytestmark = pytest.mark.timeout(60)


def kinds(events: list[Event], job_id: str) -> list[str]:
    return [e.event for e in events if e.job_id == job_id]


def all_events(backend: Backend) -> list[Event]:
    return list(gq.Queue(backend.queue, client=backend.client()).events(since="0"))


def test_each_event_kind_from_a_real_worker_run(backend: Backend, run_app: Any) -> None:
    gq.Queue(backend.queue, client=backend.client()).enable_events(maxlen=1000)
    app = make_app(backend)
    failed: list[str] = []

    @app.task(name="flaky", retries=1, result_ttl=60)
    def flaky(n: int) -> int:
        if not failed:
            failed.append("once")
            raise RuntimeError("first try fails")
        job = gq.current_job()
        assert job is not None
        job.progress(0.5, note="half")
        return n

    @app.task(name="broken", retries=0)
    def broken() -> None:
        raise ValueError("always")

    @app.task(name="plain")  # keeps no result: its ack is the plain one (ack.lua or fetch's)
    def plain() -> None:
        pass

    later = flaky.using(after=3600).enqueue(9)
    cancelled = gq.Queue(backend.queue, client=backend.client()).cancel(later.id)
    assert cancelled == 1
    ok, bad, quiet = flaky.enqueue(1), broken.enqueue(), plain.enqueue()
    run_app(app)
    assert ok.get(timeout=10) == 1
    wait_until(lambda: "dead" in kinds(all_events(backend), bad.id))
    wait_until(lambda: "done" in kinds(all_events(backend), quiet.id))
    events = all_events(backend)
    assert kinds(events, later.id) == ["enqueued", "cancelled"]
    assert kinds(events, ok.id) == ["enqueued", "started", "retried", "started", "progress", "done"]
    assert kinds(events, bad.id) == ["enqueued", "started", "dead"]
    by_kind = {(e.job_id, e.event): e for e in events}
    assert {e.task for e in events if e.job_id == ok.id and e.event != "progress"} == {"flaky"}
    assert by_kind[(ok.id, "retried")].attempts == 1
    assert "first try fails" in by_kind[(ok.id, "retried")].extra["error"]
    assert by_kind[(ok.id, "progress")].extra == {"fraction": "0.5", "note": "half"}
    assert by_kind[(ok.id, "done")].attempts == 1
    assert kinds(events, quiet.id) == ["enqueued", "started", "done"]
    assert by_kind[(quiet.id, "done")].task == "plain"
    assert by_kind[(bad.id, "dead")].task == "broken"
    assert "always" in by_kind[(bad.id, "dead")].extra["error"]
    ids = [e.id for e in events]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert all(abs(e.time - events[0].time) < 60 for e in events)


def test_events_are_off_by_default_and_write_no_stream(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def noop() -> None:
        pass

    r = noop.enqueue()
    run_app(app)
    r.get(timeout=10)
    assert backend.direct().exists(QueueKeys(backend.queue).events) == 0
    q = gq.Queue(backend.queue, client=backend.client())
    q.enable_events()
    q.disable_events()
    noop.enqueue().get(timeout=10)
    assert backend.direct().exists(QueueKeys(backend.queue).events) == 0


def test_no_event_when_a_script_refuses(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    q.enable_events()
    store = RedisQueue(backend.client(), backend.queue)
    job_id = gq.Producer(backend.queue, client=backend.client()).perform(b"x")
    assert store.push([(job_id, b"again")]) == [False]  # a duplicate id: not stored
    assert store.ack("nobody", [job_id]) == [False]  # not owned
    assert not store.retry("nobody", job_id, b"m", 1.0)
    assert not store.kill("nobody", job_id, None, dead_max_jobs=10, dead_max_age=60)
    assert q.store.cancel(["no-such-id"]) == [""]  # unknown
    assert [(e.event, e.job_id) for e in q.events(since="0")] == [("enqueued", job_id)]


def test_the_cap_keeps_about_maxlen_events(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    q.enable_events(maxlen=10)
    gq.Producer(backend.queue, client=backend.client()).perform_many([b"x"] * 500)
    length = backend.direct().xlen(QueueKeys(backend.queue).events)
    # MAXLEN ~ trims whole listpack nodes (100 entries by default on a real server).
    assert 10 <= length <= 110, length


def test_resume_from_a_last_seen_id(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    q.enable_events()
    producer = gq.Producer(backend.queue, client=backend.client())
    first = [producer.perform(b"a") for _ in range(3)]
    seen = list(q.events(since="0", count=2))
    assert [e.job_id for e in seen] == first
    second = [producer.perform(b"b") for _ in range(2)]
    assert [e.job_id for e in q.events(since=seen[-1].id)] == second
    assert list(q.events(since=None)) == []  # from now on: nothing new yet


@pytest.mark.parametrize("value", [0, -1, 1.5, "10"])
def test_a_bad_maxlen_is_refused(backend: Backend, value: Any) -> None:
    with pytest.raises(ValueError, match="positive int"):
        gq.Queue(backend.queue, client=backend.client()).enable_events(maxlen=value)


def test_the_async_iterator_sees_events_as_they_come(redis_server: RedisServer) -> None:
    import redis.asyncio

    queue = f"ev_aio_{uuid.uuid4().hex[:8]}"
    gq.Queue(queue, client=redis_server.client()).enable_events()

    async def scenario() -> list[Event]:
        client = redis.asyncio.Redis.from_url(redis_server.url)
        reader = gq.aio.events(queue, client=client, since="0", block=5.0)
        producer = gq.aio.Producer(queue, client=client)
        first = asyncio.ensure_future(reader.__anext__())  # blocks on the empty stream
        job_id = await producer.perform(b"x")
        event = await asyncio.wait_for(first, 10)
        await client.aclose()
        assert event.job_id == job_id
        return [event]

    assert [e.event for e in asyncio.run(scenario())] == ["enqueued"]


def test_gq_events_follow_sees_an_event_enqueued_after_it_started(
    redis_server: RedisServer,
) -> None:
    queue = f"ev_follow_{uuid.uuid4().hex[:8]}"
    client = redis_server.client()
    gq.Queue(queue, client=client).enable_events()
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "GQ_REDIS_URL": redis_server.url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gq.cli.admin", "events", "--queue", queue, "--follow", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        # "--follow" prints a ready line on stderr once it reads, so the push comes after.
        assert "following" in proc.stderr.readline()
        job_id = gq.Producer(queue, client=client).perform(b"x")
        with gevent.Timeout(20):
            line = proc.stdout.readline()
        assert json.loads(line)["job_id"] == job_id
        proc.send_signal(2)  # Ctrl-C
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        proc.wait()


def test_gq_events_enables_lists_and_filters(redis_server: RedisServer) -> None:
    queue = f"ev_cli_{uuid.uuid4().hex[:8]}"
    env = env_for(redis_server.url, queue)
    on = run(ADMIN, "events", "--enable", "--maxlen", "500", env=env)
    assert (on.returncode, on.stdout.strip()) == (0, f"{queue}: events on, about 500 kept")
    assert gq.events.maxlen(redis_server.client(), queue) == 500
    store = gq.Queue(queue, client=redis_server.client())
    job_id = gq.Producer(queue, client=redis_server.client()).perform(b"x")
    store.cancel(job_id)
    table = run(ADMIN, "events", env=env)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "TIME", "EVENT"]
    assert [line.split()[3] for line in lines[1:]] == ["enqueued", "cancelled"]
    only = run(ADMIN, "events", "--json", "--event", "cancelled", env=env)
    found = [json.loads(line) for line in only.stdout.splitlines()]
    assert [(e["event"], e["job_id"]) for e in found] == [("cancelled", job_id)]
    none = run(ADMIN, "events", "--json", "--task", "app.other", env=env)
    assert (none.returncode, none.stdout) == (0, "")
    said = run(ADMIN, "events", "--task", "app.other", env=env)  # (a table: no empty head)
    assert (said.returncode, said.stdout) == (0, f"no matching events on queue {queue}\n")
    after = run(ADMIN, "events", "--json", "--since", found[0]["id"], env=env)
    assert (after.returncode, after.stdout) == (0, "")
    off = run(ADMIN, "events", "--disable", env=env)
    assert off.returncode == 0 and gq.events.maxlen(redis_server.client(), queue) == 0
    kept = run(ADMIN, "events", "--json", env=env)
    assert len(kept.stdout.splitlines()) == 2 and "events are off" in kept.stderr


@pytest.mark.parametrize("flags, message", [
    (["--since", "yesterday"], "not a stream id"),
    (["--maxlen", "5"], "--maxlen goes with --enable"),
    (["--enable", "--maxlen", "0"], "--maxlen"),
    (["--event", "exploded"], "invalid choice"),
    (["--enable", "--disable"], "not allowed with"),
])  # fmt: skip
def test_gq_events_refuses_bad_flags(redis_server: RedisServer, flags: list[str],
                                     message: str) -> None:  # fmt: skip
    result = run(ADMIN, "events", *flags, env=env_for(redis_server.url, "ev_cli_bad"))
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_gq_events_of_a_missing_queue_says_so(redis_server: RedisServer) -> None:
    queue = f"ev_missing_{uuid.uuid4().hex[:8]}"
    result = run(ADMIN, "events", env=env_for(redis_server.url, queue))
    assert result.returncode == 1 and f"queue {queue} does not exist" in result.stderr


def test_a_refused_event_does_not_stop_the_change(backend: Backend) -> None:
    # A key of another type where the stream goes: XADD fails, the kill still completes.
    q = gq.Queue(backend.queue, client=backend.client())
    q.enable_events()
    backend.direct().set(QueueKeys(backend.queue).events, "not a stream")
    store = RedisQueue(backend.client(), backend.queue)
    job_id = gq.Producer(backend.queue, client=backend.client()).perform(b"x")
    store.register("c1")
    assert [i for i, _ in store.fetch("c1", 1)] == [job_id]
    assert store.kill("c1", job_id, None, dead_max_jobs=10, dead_max_age=60)
    assert backend.direct().zscore(f"{backend.queue}:dead", job_id) is not None
