"""Search and bulk actions by filter (issue 34) on fakeredis and a real Redis: what
``gq.Queue.jobs``, ``purge``, ``move``, ``retry_dead``, ``delete_dead`` and ``reschedule``
find and change, the bookkeeping they clean, and the bounds of every read."""

from __future__ import annotations

import time
from typing import Any

import gevent
import pytest

import gq
from gq import bulk
from gq.errors import ConfigurationError
from gq.jobfilter import JobFilter
from gq.store import scan
from gq.store.groupkeys import group_key
from tests.bulk_support import Jobs, task_message, v7
from tests.helpers import Backend, wait_until

pytestmark = pytest.mark.timeout(60)


def setup(backend: Backend) -> tuple[gq.Queue, Jobs, Any]:
    client = backend.client()
    return gq.Queue(backend.queue, client=client), Jobs(client, backend.queue), backend.direct()


def ids(page: Any) -> set[str]:
    return {job.id for job in page.jobs}


def test_search_finds_jobs_by_each_filter(backend: Backend) -> None:
    q, w, _ = setup(backend)
    acme = w.ready("app.send", "a@x", tenant="acme")
    beta = w.ready("app.send", "b@x", tenant="beta")
    other = w.ready("app.other", tenant="acme")
    later = w.scheduled("app.send", "c@x", tenant="acme")
    died = w.dead("app.send", "d@x", tenant="acme", error="SMTP timeout")
    lined = w.grouped("app.send", "tenant:zed", "e@x", tenant="zed")
    every = ids(q.jobs())
    assert every == {acme, beta, other, later, died, lined}
    assert ids(q.jobs(JobFilter(task="app.send"))) == {acme, beta, later, died, lined}
    assert ids(q.jobs(JobFilter(args=(("tenant", "acme"),)))) == {acme, other, later, died}
    assert ids(q.jobs(JobFilter(states=("dead",), error="timeout"))) == {died}
    assert ids(q.jobs(JobFilter(states=("scheduled",)))) == {later}
    assert ids(q.jobs(JobFilter(states=("ready",)))) == {acme, beta, other, lined}
    assert ids(q.jobs(JobFilter(group="tenant:zed"))) == {lined}
    assert ids(q.jobs(JobFilter(id_prefix=beta[:-4]))) == {beta}
    assert ids(q.jobs(JobFilter(args_contains="c@X"))) == {later}


def test_a_filter_by_an_arguments_name_matches_calls_by_position_once_it_knows_the_task(
    backend: Backend,
) -> None:
    app = gq.App(queue=backend.queue)

    @app.task(name="app.send")
    def send(to: str, tenant: str = "", *more: str, **extra: str) -> None: ...

    q, w, _ = setup(backend)
    by_position = w.ready("app.send", "a@x", "acme")
    by_name = w.dead("app.send", "b@x", tenant="acme", error="x")
    other_tenant = w.ready("app.send", "c@x", "beta")
    too_short = w.ready("app.send", "d@x")  # (no second argument: no tenant to match)
    unknown_task = w.ready("app.other", "e@x", "acme")  # (its parameters are not known)
    acme = JobFilter(args=(("tenant", "acme"),))
    assert ids(q.jobs(acme)) == {by_name}  # (by name only: the tasks are not known)
    assert ids(q.jobs(acme.naming(app.tasks))) == {by_position, by_name}
    assert ids(q.jobs(JobFilter(args=(("to", "c@x"),)).naming(app.tasks))) == {other_tenant}
    assert ids(q.jobs(JobFilter(args=(("0", "d@x"),)).naming(app.tasks))) == {too_short}
    assert unknown_task not in ids(q.jobs(acme.naming(app.tasks)))
    assert send.positional_names == ("to", "tenant")
    assert q.purge(acme.naming(app.tasks)).done == 1  # (the ready one; dead is not purged)
    assert ids(q.jobs(JobFilter(states=("ready",)))) == {other_tenant, too_short, unknown_task}


def test_a_found_job_shows_its_task_arguments_times_and_error(backend: Backend) -> None:
    q, w, _ = setup(backend)
    job_id = v7(3600)
    w.dead("app.send", "a@x", "\x1b[31m" + "y" * 200, tenant="acme", error="boom", died=1e9,
           job_id=job_id)  # fmt: skip
    (found,) = q.jobs(JobFilter(states=("dead",))).jobs
    row = found.as_dict()
    assert {k: row[k] for k in ("id", "state", "task", "attempt", "died_at", "error")} == {
        "id": job_id, "state": "dead", "task": "app.send", "attempt": 3, "died_at": 1e9,
        "error": "boom",
    }  # fmt: skip
    assert abs(row["enqueued_at"] - (time.time() - 3600)) < 5
    assert row["args"].startswith("'a@x', '\\x1b[31myyy") and "tenant='acme'" in row["args"]
    assert len(row["args"]) < 120 and "…" in row["args"]  # escaped and cut


def test_search_pages_resume_without_gaps_or_repeats(backend: Backend) -> None:
    q, w, direct = setup(backend)
    ready = [f"r{i:04d}" for i in range(1234)]
    w.q.push([(i, task_message(i, "t", i)) for i in ready])
    dead = {f"d{i:04d}": 1000.0 + i // 7 for i in range(1100)}  # ties: seven a second
    direct.hset(w.q.keys.data, mapping={i: task_message(i, "t") for i in dead})
    direct.zadd(w.q.keys.dead, dead)
    seen: list[str] = []
    page = q.jobs(limit=137)
    while True:
        seen += [job.id for job in page.jobs]
        if page.cursor is None:
            break
        page = q.jobs(limit=137, cursor=page.cursor)
    assert sorted(seen) == sorted([*ready, *dead])
    assert len(seen) == len(set(seen))


def test_every_read_is_bounded(backend: Backend) -> None:
    q, w, direct = setup(backend)
    w.q.push([(f"r{i}", task_message(f"r{i}", "t")) for i in range(2000)])
    direct.zadd(w.q.keys.dead, {f"d{i}": i for i in range(1500)})
    sent: list[tuple[Any, ...]] = []
    client = q.client
    execute = client.execute_command

    def spy(*args: Any, **kwargs: Any) -> Any:
        sent.append(args)
        return execute(*args, **kwargs)

    client.execute_command = spy
    assert len(q.jobs(JobFilter(task="none"), limit=10).jobs) == 0
    names = {str(args[0]).upper() for args in sent}
    assert "KEYS" not in names and "HGETALL" not in names and "SMEMBERS" not in names
    for args in sent:
        if args[0] == "LRANGE":
            assert int(args[3]) - int(args[2]) + 1 <= scan.PAGE
        if args[0] == "ZRANGE" and not str(args[1]).endswith(":consumers"):  # a few
            assert "LIMIT" in args and int(args[args.index("LIMIT") + 2]) <= scan.PAGE
        if args[0] == "HMGET":
            assert len(args) - 2 <= scan.PAGE


def test_purge_removes_matching_jobs_with_their_bookkeeping(backend: Backend) -> None:
    q, w, direct = setup(backend)
    keys = w.q.keys
    broken = [w.ready("app.broken", i) for i in range(3)]
    fine = [w.ready("app.fine", i) for i in range(3)]
    late = w.scheduled("app.broken", 9)
    lined = w.grouped("app.broken", "acme", 1)
    keep_in_line = w.grouped("app.fine", "acme", 2)
    later = w.grouped("app.broken", "beta", 3, after=3600)
    locked = v7()
    message = task_message(locked, "app.broken", opts={"unique": "L1"})
    direct.hset(keys.data, locked, message)
    direct.rpush(keys.active, locked)
    direct.set(keys.unique("L1"), locked)
    direct.set(keys.unique("L2"), "someone-else")
    direct.hset(keys.recovered, broken[0], 2)
    direct.zadd(keys.cancelled, {broken[1]: 1.0})
    assert q.stats()["grouped"] == 2
    result = q.purge(JobFilter(task="app.broken"))
    assert result == bulk.BulkResult(matched=7, done=7)
    assert w.active() == fine
    assert q.stats()["scheduled"] == 0 and q.stats()["grouped"] == 1
    for job_id in [*broken, late, lined, later, locked]:
        assert not w.has_message(job_id)
    assert not direct.hexists(keys.recovered, broken[0])
    assert direct.zscore(keys.cancelled, broken[1]) is None
    assert not direct.hexists(group_key(keys.name, "later"), later)
    assert direct.get(keys.unique("L1")) is None
    assert direct.get(keys.unique("L2")) == b"someone-else"
    # The line is whole again: its other job is fetched, the purged one never.
    w.q.register("c1")
    fetched = [job_id for job_id, _ in w.q.fetch("c1", 50)]
    assert sorted(fetched) == sorted([*fine, keep_in_line])


def test_a_purged_job_in_the_middle_of_a_line_is_never_fetched(backend: Backend) -> None:
    q, w, _ = setup(backend)
    line = [w.grouped("app.t", "acme", i) for i in range(5)]
    assert q.purge(JobFilter(args=(("0", "2"),))).done == 1
    w.q.register("c1")
    fetched = [job_id for job_id, _ in w.q.fetch("c1", 50)]
    assert fetched == [line[0], line[1], line[3], line[4]]
    assert q.stats()["grouped"] == 0


def test_dry_run_counts_and_everything_must_be_asked_for(backend: Backend) -> None:
    q, w, _ = setup(backend)
    made = [w.ready("app.t", i) for i in range(4)]
    w.dead("app.t")
    assert q.purge(JobFilter(task="app.t"), dry_run=True) == bulk.BulkResult(4, 0)
    with pytest.raises(ConfigurationError, match="everything=True"):
        q.purge(JobFilter())
    with pytest.raises(ConfigurationError, match="everything=True"):
        q.delete_dead(JobFilter())
    with pytest.raises(ConfigurationError, match="'running' is not for this action"):
        q.purge(JobFilter(states=("running",), task="app.t"))
    assert w.active() == made
    assert q.purge(JobFilter(), everything=True).done == 4
    assert w.active() == [] and q.stats()["dead"] == 1


def test_purge_keeps_every_job_pushed_while_it_runs(backend: Backend, monkeypatch: Any) -> None:
    q, w, _ = setup(backend)
    old = [w.ready("app.old", i) for i in range(1200)]
    new: list[str] = []
    real = bulk.bulk.purge

    def pushing(*args: Any) -> Any:
        new.extend(w.ready("app.new", i) for i in range(300))  # a busy producer meanwhile
        return real(*args)

    monkeypatch.setattr(bulk.bulk, "purge", pushing)
    assert q.purge(JobFilter(task="app.old")).done == len(old)
    assert w.active() == new


def test_move_keeps_each_job_in_its_state(backend: Backend) -> None:
    q, w, direct = setup(backend)
    target = backend.queue + "-moved"
    t = Jobs(direct, target)
    ready = [w.ready("app.t", i) for i in range(3)]
    due = w.scheduled("app.t", at=4e9)
    died = w.dead("app.t", died=1234.5)
    lined = w.grouped("app.t", "acme")
    later = w.grouped("app.t", "beta", after=3600)
    stay = w.ready("app.u")
    messages = {i: direct.hget(w.q.keys.data, i) for i in [*ready, due, died, lined, later]}
    try:
        assert q.move(JobFilter(task="app.t"), to=target).done == 7
        assert w.active() == [stay]
        assert t.active() == ready
        assert direct.zscore(t.q.keys.scheduled, due) == 4e9
        assert direct.zscore(t.q.keys.dead, died) == 1234.5
        assert direct.hget(group_key(target, "later"), later) == b"beta"
        assert all(direct.hget(t.q.keys.data, i) == m for i, m in messages.items())
        assert not any(w.has_message(i) for i in messages)
        assert gq.Queue(target, client=direct).stats()["grouped"] == 1
        assert q.stats()["grouped"] == 0
        with pytest.raises(ConfigurationError, match="same queue"):
            q.move(JobFilter(), to=backend.queue)
    finally:
        gq.Queue(target, client=direct).store.delete_queue()
        direct.delete(*(group_key(target, n) for n in ("ring", "lines", "later")))


def test_move_leaves_a_job_whose_id_the_target_holds_for_another(backend: Backend) -> None:
    q, w, direct = setup(backend)
    target = backend.queue + "-moved"
    job_id = w.ready("app.t", 1)
    direct.hset(target + ":data", job_id, b"another job")
    try:
        assert q.move(JobFilter(task="app.t"), to=target) == bulk.BulkResult(1, 0, 1)
        assert w.active() == [job_id]
        assert direct.hget(target + ":data", job_id) == b"another job"
    finally:
        direct.delete(target + ":data")


def test_a_move_across_slots_copies_then_deletes_and_completes_after_a_crash(
    backend: Backend, monkeypatch: Any
) -> None:
    q, w, direct = setup(backend)
    monkeypatch.setattr(bulk.bulk, "same_slot", lambda *_: False)
    target = backend.queue + "-far"
    t = Jobs(direct, target)
    made = [w.ready("app.t", i) for i in range(1500)]
    dead = [w.dead("app.t", i, died=100.0 + i) for i in range(20)]
    # A crash after the first copy: those jobs are in both queues.
    first = scan.read(q.store, ("ready",), scan.first(("ready",)))
    copies = [("ready", i, m or b"", None, "") for i, _, _, m, _ in first.found]
    assert set(bulk.bulk.move_in(t.q, copies)) == {1}
    try:
        assert q.move(JobFilter(task="app.t"), to=target).done == 1520
        assert w.active() == [] and q.stats()["dead"] == 0
        assert t.active() == made  # in their order, none twice
        assert sorted(i.decode() for i in direct.zrange(t.q.keys.dead, 0, -1)) == sorted(dead)
    finally:
        gq.Queue(target, client=direct).store.delete_queue()


def test_dead_jobs_are_retried_and_deleted_by_filter(backend: Backend) -> None:
    q, w, direct = setup(backend)
    timeouts = [w.dead("app.a", i, error="Read timeout") for i in range(3)]
    refused = w.dead("app.a", error="connection refused")
    other = w.dead("app.b", error="Read timeout")
    assert q.retry_dead(JobFilter(task="app.a", error="TIMEOUT"), reset_attempts=True).done == 3
    assert sorted(w.active()) == sorted(timeouts)
    assert all(gq.job.decode(direct.hget(w.q.keys.data, i)).attempt == 0 for i in timeouts)
    assert q.delete_dead(JobFilter(task="app.b")).done == 1
    assert not w.has_message(other)
    assert [i.decode() for i in direct.zrange(w.q.keys.dead, 0, -1)] == [refused]


def test_reschedule_moves_only_the_matching_scheduled_jobs(backend: Backend) -> None:
    q, w, direct = setup(backend)
    stuck = [w.scheduled("app.a", i, at=4e9) for i in range(3)]
    other = w.scheduled("app.b", at=4e9)
    assert q.reschedule(JobFilter(task="app.a"), at=2e9).done == 3
    assert all(direct.zscore(w.q.keys.scheduled, i) == 2e9 for i in stuck)
    assert direct.zscore(w.q.keys.scheduled, other) == 4e9
    before = q.store.server_time()
    assert q.reschedule(JobFilter(task="app.b"), after=600).done == 1
    assert 599 < direct.zscore(w.q.keys.scheduled, other) - before < 610
    with pytest.raises(ConfigurationError, match="one of at= and after="):
        q.reschedule(JobFilter(), at=1, after=1)


def test_running_jobs_are_listed_and_left_alone(backend: Backend) -> None:
    q, w, _ = setup(backend)
    job_id = w.ready("app.t")
    w.q.register("c1")
    assert [i for i, _ in w.q.fetch("c1", 1)] == [job_id]
    (found,) = q.jobs(JobFilter(states=("running",))).jobs
    assert (found.id, found.state, found.task) == (job_id, "running", "app.t")
    assert q.purge(JobFilter(task="app.t")).matched == 0
    assert w.has_message(job_id)


def test_a_purge_while_a_worker_drains_runs_or_removes_each_job_once(
    backend: Backend, start: Any
) -> None:
    q, w, direct = setup(backend)
    made = [f"job-{i:04d}" for i in range(3000)]
    w.q.push([(i, task_message(i, "app.odd" if n % 2 else "app.even")) for n, i in enumerate(made)])
    ran: list[str] = []

    def handler(job: gq.Job) -> None:
        ran.append(job.id)
        gevent.sleep(0.005)  # a drain of about a second: the purge runs within it

    start(handler, processor_concurrency=20, poller_buffer_size=50)
    wait_until(lambda: len(ran) > 100, message="the worker to be draining")
    result = q.purge(JobFilter(task="app.odd"))
    wait_until(lambda: direct.hlen(w.q.keys.data) == 0, timeout=30, message="the rest to end")
    assert len(ran) + result.done == len(made)
    assert 0 < result.done < len(made) // 2, result  # the purge overlapped the drain
    assert len(ran) == len(set(ran))  # none ran twice
    purged = set(made) - set(ran)
    assert len(purged) == result.done and all(int(i[4:]) % 2 for i in purged)  # only odd ones


def test_a_line_with_a_purged_job_keeps_its_group_counts_under_a_limit(backend: Backend) -> None:
    q, w, direct = setup(backend)
    q.set_group_limits(concurrency=2)
    line = [w.grouped("app.t", "acme", i) for i in range(5)]
    assert q.purge(JobFilter(args=(("0", "1"),))).done == 1
    w.q.register("c1")
    fetched: list[str] = []
    for _ in range(6):
        taken = [job_id for job_id, _ in w.q.fetch("c1", 10)]
        fetched += taken
        assert w.q.ack("c1", taken) == [True] * len(taken)
    assert fetched == [line[0], *line[2:]]
    assert direct.hget(group_key(w.q.keys.name, "state"), "held\nacme") is None
    assert direct.hlen(group_key(w.q.keys.name, "of")) == 0


def test_a_search_with_a_budget_stops_with_a_cursor_to_go_on(backend: Backend) -> None:
    q, w, _ = setup(backend)
    w.q.push([(f"r{i:04d}", task_message(f"r{i:04d}", "app.t")) for i in range(1200)])
    last = w.ready("app.wanted")
    page = q.jobs(JobFilter(task="app.wanted"), budget=0)
    assert page.jobs == [] or [j.id for j in page.jobs] == [last]
    pages = 1
    while page.cursor is not None and not page.jobs:
        page = q.jobs(JobFilter(task="app.wanted"), budget=0, cursor=page.cursor)
        pages += 1
    assert [j.id for j in page.jobs] == [last] and pages == 1  # the newest first: page one
    found = q.jobs(JobFilter(task="app.t"), limit=5000, budget=0)
    assert len(found.jobs) == scan.PAGE - 1 and found.cursor is not None  # one page, then stop


def test_scheduled_jobs_run_now_by_filter_a_grouped_one_in_its_line(backend: Backend) -> None:
    q, w, direct = setup(backend)
    now = [w.scheduled("app.a", i, at=4e9) for i in range(2)]
    waiting = w.scheduled("app.b", at=4e9)
    lined = w.grouped("app.a", "acme", after=3600)
    assert q.run_scheduled(JobFilter(task="app.a"), dry_run=True) == bulk.BulkResult(3, 0)
    assert q.run_scheduled(JobFilter(task="app.a")).done == 3
    assert sorted(w.active()) == sorted(now)
    assert q.stats()["grouped"] == 1 and q.stats()["scheduled"] == 1
    assert [j.id for j in q.jobs(JobFilter(group="acme")).jobs] == [lined]
    assert direct.zscore(w.q.keys.scheduled, waiting) == 4e9


def test_a_purge_of_every_other_job_keeps_the_rest_in_order(
    backend: Backend, monkeypatch: Any
) -> None:
    q, w, _ = setup(backend)
    made = [f"j{i:05d}" for i in range(3100)]
    w.q.push([(i, task_message(i, "app.odd" if n % 2 else "app.even")) for n, i in enumerate(made)])
    new: list[str] = []
    real = bulk.bulk.purge

    def pushing(*args: Any) -> Any:
        new.extend(w.ready("app.new") for _ in range(50))  # the window moves toward the head
        return real(*args)

    monkeypatch.setattr(bulk.bulk, "purge", pushing)
    assert q.purge(JobFilter(task="app.odd")).done == 1550
    assert w.active() == [*made[::2], *new]
