"""The history of finished jobs (issue 34) on fakeredis and a real Redis: the entries the
scripts that end a job write (done, dead with its error, cancelled, retried then done, a
byte job), the filters and cursor of ``gq.Queue.history``, retention by count and age, and
0 turning it off."""

from __future__ import annotations

import time
from typing import Any

import gevent
import pytest

import gq
from gq import history
from gq.errors import ConfigurationError
from gq.jobfilter import JobFilter
from gq.store.jobs import RedisQueue
from tests.helpers import Backend, wait_until
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture

pytestmark = pytest.mark.timeout(60)


def entries(q: gq.Queue, **given: Any) -> list[history.HistoryEntry]:
    return q.history(JobFilter.parse(**given) if given else None, limit=1000).entries


def ended(q: gq.Queue, n: int) -> list[history.HistoryEntry]:
    wait_until(lambda: len(entries(q)) >= n)
    return entries(q)


def test_done_dead_retried_and_byte_jobs_are_recorded(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: dict[str, int] = {}

    @app.task(result_ttl=60)
    def add(a: int, b: int) -> int:
        time.sleep(0.05)
        return a + b

    @app.task(retries=0)
    def broken() -> None:
        raise ValueError("boom: the bug of the day")

    @app.task(retries=3)
    def flaky(key: str) -> str:
        runs[key] = runs.get(key, 0) + 1
        if runs[key] < 3:
            raise RuntimeError("not yet")
        return key

    @app.raw(queue=backend.queue)
    def raw(job: gq.Job) -> None:
        return None

    q = gq.Queue(backend.queue, client=backend.client())
    done = add.enqueue(2, 3).id
    dead = broken.enqueue().id
    retried = flaky.enqueue("k").id
    byte_id = gq.Producer(backend.queue, client=backend.client()).perform(gq.Job(data=b"\x01raw"))
    run_app(app)
    by_id = {e.id: e for e in ended(q, 4)}
    assert set(by_id) == {done, dead, retried, byte_id}
    first = by_id[done]
    assert (first.state, first.task, first.attempts, first.result_kept) == (
        "done",
        add.name,
        1,
        True,
    )
    assert first.args == "2, 3"
    assert first.started_at is not None and first.duration is not None
    assert 0.04 <= first.duration < 5 and first.enqueued_at is not None
    assert first.enqueued_at <= first.started_at <= first.finished_at
    assert (by_id[dead].state, by_id[dead].attempts) == ("dead", 1)
    assert "boom: the bug of the day" in (by_id[dead].error or "")
    assert (by_id[retried].state, by_id[retried].attempts, by_id[retried].error) == (
        "done",
        3,
        None,
    )
    assert (by_id[byte_id].state, by_id[byte_id].task, by_id[byte_id].result_kept) == (
        "done", None, False)  # fmt: skip
    row = first.as_dict()
    assert row["duration"] == first.duration and row["id"] == done


def test_cancelled_jobs_ready_and_running(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    started: list[str] = []

    @app.task
    def slow() -> None:
        started.append("x")
        for _ in range(600):
            gevent.sleep(0.05)

    q = gq.Queue(backend.queue, client=backend.client())
    waiting = slow.using(after=3600).enqueue().id
    assert q.cancel(waiting) == 1
    (entry,) = entries(q)
    assert (entry.id, entry.state, entry.task) == (waiting, "cancelled", slow.name)
    running = slow.enqueue().id
    run_app(app)
    wait_until(lambda: started)
    assert q.cancel(running) == 1
    wait_until(lambda: len(entries(q)) == 2)
    assert entries(q)[0].id == running and entries(q)[0].state == "cancelled"
    assert [e.id for e in entries(q, state=["done"])] == []


def _fill(backend: Backend, n: int) -> list[str]:
    """n done jobs acknowledged through ack.lua, oldest first."""
    producer = gq.Producer(backend.queue, client=backend.client())
    ids = [producer.perform(gq.Job(data=f"job {i}".encode())) for i in range(n)]
    store = RedisQueue(backend.client(), backend.queue)
    store.register("history-test")
    for job_id, _ in store.fetch("history-test", n):
        assert store.ack("history-test", [job_id]) == [True]
    return ids


def test_filters_and_a_resumable_cursor(backend: Backend) -> None:
    ids = _fill(backend, 25)
    q = gq.Queue(backend.queue, client=backend.client())
    seen: list[history.HistoryEntry] = []
    cursor = None
    while True:
        page = q.history(limit=7, cursor=cursor)
        seen += page.entries
        cursor = page.cursor
        if cursor is None:
            break
    # Each once, newest first (jobs that ended in the same millisecond in any order).
    assert sorted(e.id for e in seen) == sorted(ids) and len(seen) == len(ids)
    ends = [e.finished_at for e in seen]
    assert ends == sorted(ends, reverse=True)
    assert [e.id for e in entries(q, id_prefix=ids[3])] == [ids[3]]
    assert [e.id for e in entries(q, args_contains="job 12")] == [ids[12]]
    assert entries(q, state=["dead"]) == [] and len(entries(q, state=["finished"])) == 25
    assert entries(q, older_than="1h") == [] and len(entries(q, newer_than="1h")) == 25
    with pytest.raises(ConfigurationError):
        q.history(JobFilter(states=("ready",)))
    with pytest.raises(ConfigurationError):  # (not the history, silently)
        q.jobs(JobFilter(states=("finished", "ready")))
    with pytest.raises(ConfigurationError):
        q.history(cursor="nonsense")
    listed = q.jobs(JobFilter(states=("finished",)), limit=100).jobs
    assert {job.id for job in listed} == set(ids) and {job.state for job in listed} == {"done"}


def test_a_cursor_resumes_where_it_was_while_jobs_end_and_the_oldest_are_trimmed(
    backend: Backend,
) -> None:
    """Entries carry no number: a cursor's is counted from the entries ever written, so it
    must hold while new entries are pushed at the tail and old ones trimmed at the head."""
    q = gq.Queue(backend.queue, client=backend.client())
    q.history_settings(history_max=30)
    ids = _fill(backend, 25)
    first = q.history(limit=7)
    assert [e.id for e in first.entries] == ids[::-1][:7]
    later = _fill(backend, 10)  # 35 written: the 5 oldest trimmed away
    rest, cursor = [], first.cursor
    while cursor is not None:
        page = q.history(limit=4, cursor=cursor)
        rest += [e.id for e in page.entries]
        cursor = page.cursor
    assert rest == ids[::-1][7:20]  # on from the 8th newest, down to what the trim left
    assert [e.id for e in q.history(limit=10).entries] == later[::-1]


def test_a_history_that_expired_while_the_queue_was_quiet_starts_again(
    backend: Backend,
) -> None:
    """The list expires after its TTL with no write; the settings' `written` count stays.
    Entries are numbered from that count, so the new ones must list alone and a cursor
    into the expired ones must end, not show new entries as older ones."""
    q = gq.Queue(backend.queue, client=backend.client())
    _fill(backend, 5)
    first = q.history(limit=2)
    direct, key = backend.direct(), q.store.keys.finished
    direct.pexpire(key, 1)
    wait_until(lambda: not direct.exists(key), message="the history expired")
    assert direct.exists(q.store.keys.finished_settings)
    later = _fill(backend, 3)
    assert [e.id for e in q.history(limit=10).entries] == later[::-1]
    page = q.history(limit=10, cursor=first.cursor)
    assert (page.entries, page.cursor) == ([], None)
    paged, cursor = [], None
    for _ in range(3):
        page = q.history(limit=1, cursor=cursor)
        paged += [e.id for e in page.entries]
        cursor = page.cursor
    assert paged == later[::-1] and cursor is None


def test_retention_by_count_and_by_age_and_off(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    assert q.history_settings() == (history.HISTORY_MAX, history.HISTORY_TTL)
    assert q.history_settings(history_max=5) == (5, history.HISTORY_TTL)
    ids = _fill(backend, 12)
    kept = entries(q)
    assert len(kept) == 5 and {e.id for e in kept} <= set(ids[-6:])  # (ties in one ms)
    direct = backend.direct()
    assert 0 < direct.pttl(q.store.keys.finished) <= history.HISTORY_TTL * 1000
    # By age: entries older than the TTL go at the next write.
    q.history_settings(history_max=100, history_ttl=60)
    key = q.store.keys.finished
    for i, member in enumerate(direct.lrange(key, 0, -1)):  # as if they ended in 1970
        direct.lset(key, i, b"%013d" % 1000 + member[13:])
    fresh = _fill(backend, 1)
    assert [e.id for e in entries(q)] == fresh
    q.history_settings(history_max=0)
    _fill(backend, 3)
    assert [e.id for e in entries(q)] == fresh  # off: nothing written
    with pytest.raises(ConfigurationError):
        q.history_settings(history_max=-1)
    assert q.history_settings(history_ttl=0.25) == (0, 1.0)  # whole seconds, at least 1


def test_deleting_the_queue_deletes_its_history(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    q.history_settings(history_max=5)
    _fill(backend, 2)
    assert len(entries(q)) == 2
    q.store.delete_queue()
    assert backend.direct().exists(q.store.keys.finished, q.store.keys.finished_settings) == 0
    assert entries(q) == []


def test_a_trim_is_bounded_per_call(backend: Backend) -> None:
    q = gq.Queue(backend.queue, client=backend.client())
    key = q.store.keys.finished
    direct = backend.direct()
    now_ms = time.time() * 1000
    entry = b"%013d" % now_ms + b"d\x00\x01x"
    direct.lpush(key, *[entry] * 2500)
    q.history_settings(history_max=10)
    _fill(backend, 1)
    assert direct.llen(key) == 2501 - 1000  # one call removed HISTORY_TRIM at most
    _fill(backend, 2)
    assert direct.llen(key) == 10


def test_a_curlyq_consumer_shares_the_queue_unaffected(redis_server: Any) -> None:
    """curlyq's own scripts fetch and ack beside a gq consumer that writes the history:
    curlyq's keys hold what its scripts expect, its acks work (and write no entry: the
    history is gq's), gq's acks are recorded."""
    from tests.curlyq_lua import CurlyqScripts, script_sources

    client = redis_server.client()
    name = f"hist-cq-{time.time_ns()}"
    try:
        cq = CurlyqScripts(client, script_sources())
        producer = gq.Producer(name, client=client)
        ids = [producer.perform(gq.Job(data=b"x")) for _ in range(2)]
        store = RedisQueue(client, name)
        k = store.keys
        inflight = k.inflight("go-1")
        cq.run("registerConsumer", [k.consumers], [repr(time.time()), inflight])
        taken = cq.run("getJobs", [k.consumers, k.active, inflight, k.data, k.signal],
                       [1, inflight])  # fmt: skip
        assert len(taken) == 1
        go_id = next(i for i in ids if client.sismember(inflight, i))
        assert cq.run("ackJob", [inflight, k.data], [go_id]) == 1
        store.register("py-1")
        [(py_id, _)] = store.fetch("py-1", 1)
        assert store.ack("py-1", [py_id]) == [True]
        assert [e.id for e in gq.Queue(name, client=client).history().entries] == [py_id]
        assert client.hlen(k.data) == 0 and client.llen(k.active) == 0
    finally:
        for key in client.scan_iter(f"{name}*"):
            client.delete(key)
        client.close()
