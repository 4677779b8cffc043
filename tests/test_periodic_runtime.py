"""Periodic schedules at runtime (issue 34): added, changed, paused, resumed and removed
through gq.Queue and `gq periodic`, kept in Redis, taken up by running consumers within a
heartbeat, and still enqueued exactly once per occurrence across consumers (SPEC 11)."""

from __future__ import annotations

import json
from typing import Any

import gevent
import pytest

import gq
from gq.errors import ConfigurationError
from tests.cli_support import ADMIN, Worker, env_for, run
from tests.helpers import Backend, RedisServer, wait_until
from tests.queue_sides import BothSides
from tests.test_periodic import assert_consecutive, occurrence_of

pytestmark = pytest.mark.timeout(60)


def queue_of(backend: Backend) -> gq.Queue:
    return gq.Queue(backend.queue, client=backend.client())


def test_a_schedule_is_added_changed_paused_resumed_and_removed(backend: Backend) -> None:
    q = queue_of(backend)
    assert q.add_periodic("nightly", "app.report", cron="0 3 * * *", args=[1], kwargs={"a": 2})
    assert not q.add_periodic("nightly", "app.report", cron="30 3 * * *")  # a change
    [found] = q.periodic_schedules()
    assert (found.name, found.task, found.cron, found.args, found.paused) == (
        "nightly", "app.report", "30 3 * * *", [], False)
    q.pause_periodic("nightly")
    assert q.periodic_schedules()[0].paused
    q.resume_periodic("nightly")
    assert not q.periodic_schedules()[0].paused
    assert q.remove_periodic("nightly") and not q.remove_periodic("nightly")
    assert q.periodic_schedules() == []
    with pytest.raises(KeyError):
        q.pause_periodic("nightly")


@pytest.mark.parametrize("rule, reason", [
    ({"cron": "61 * * * *"}, "bad cron rule"),
    ({"cron": "* * *"}, "bad cron rule"),
    ({"every": 0}, "whole number of seconds >= 1"),
    ({}, "exactly one of cron= and every="),
])
def test_a_bad_rule_is_refused_and_nothing_is_kept(
    backend: Backend, rule: dict[str, Any], reason: str
) -> None:
    q = queue_of(backend)
    with pytest.raises(ConfigurationError, match=reason):
        q.add_periodic("bad", "app.t", **rule)
    assert q.periodic_schedules() == []


def test_arguments_without_a_messagepack_form_are_refused(backend: Backend) -> None:
    with pytest.raises(ConfigurationError, match="bad"):
        queue_of(backend).add_periodic("bad", "app.t", every=5, args=[object()])


def test_a_name_a_code_schedule_holds_is_refused(backend: Backend) -> None:
    backend.direct().hset(f"{backend.queue}:periodic:rules", "tick", "every\t1\tUTC")
    with pytest.raises(ConfigurationError, match="given in code"):
        queue_of(backend).add_periodic("tick", "app.t", every=5)


def runtime_names(consumer: gq.Consumer) -> set[str]:
    runner = consumer._periodic
    assert runner is not None
    return {s.name for s in runner.schedules}


@pytest.mark.timeout(60)
def test_running_consumers_take_it_up_once_per_occurrence_pause_and_drop_it(
    backend: Backend,
) -> None:
    ran: list[str] = []
    consumers = [gq.Consumer(backend.queue, client=backend.client(), heartbeat_poll_interval=1)
                 for _ in range(3)]  # fmt: skip
    greenlets = [gevent.spawn(c.run, lambda job: ran.append(job.id)) for c in consumers]
    q = queue_of(backend)
    try:
        q.add_periodic("rt", "stamp", every=1, args=["rt"])
        wait_until(lambda: all("rt" in runtime_names(c) for c in consumers), 10)
        wait_until(lambda: len(ran) >= 4, 20, message="four occurrences")
        q.pause_periodic("rt")
        wait_until(lambda: not any("rt" in runtime_names(c) for c in consumers), 10)
        paused_at = q.store.server_time()
        wait_until(lambda: q.store.server_time() >= paused_at + 2.5, 10)
        before = list(ran)
        assert_consecutive(before)
        assert max(map(occurrence_of, before)) <= paused_at  # none while paused
        q.resume_periodic("rt")
        wait_until(lambda: len(ran) > len(before), 20, message="an occurrence after resume")
        assert min(occurrence_of(i) for i in ran[len(before):]) > paused_at + 2
        assert q.remove_periodic("rt")
        wait_until(lambda: not any("rt" in runtime_names(c) for c in consumers), 10)
    finally:
        for c in consumers:
            c.stop()
        for g in greenlets:
            assert g.get(timeout=15) is None
    assert len(set(ran)) == len(ran)
    assert "rt" not in q.store.periodic_state()  # (removed: its cursor forgotten too)


@pytest.mark.parametrize("withdraw", ["pause", "remove"])
def test_a_consumer_enqueues_nothing_after_a_pause_or_removal_before_it_reads_again(
    backend: Backend, withdraw: str
) -> None:
    # The consumer reads the runtime schedules at its start and then once a minute: the
    # occurrences due after the pause or the removal fall before its next read.
    q = queue_of(backend)
    q.add_periodic("rt", "stamp", every=1, args=["rt"])
    ran: list[str] = []
    consumer = gq.Consumer(backend.queue, client=backend.client(), heartbeat_poll_interval=60)
    worker = gevent.spawn(consumer.run, lambda job: ran.append(job.id))
    try:
        wait_until(lambda: len(ran) >= 1, 20, message="a first occurrence")
        getattr(q, f"{withdraw}_periodic")("rt")
        at = q.store.server_time()
        wait_until(lambda: q.store.server_time() >= at + 2.5, 10)  # two occurrences due
        wait_until(lambda: "rt" not in runtime_names(consumer), 10)  # (dropped at once)
        kept = [i.decode() for i in backend.direct().hkeys(f"{backend.queue}:data")]
        assert max(map(occurrence_of, ran + kept)) <= at  # none enqueued after it
    finally:
        consumer.stop()
        assert worker.get(timeout=15) is None
    if withdraw == "remove":  # its cursor is not written again once forgotten
        assert "rt" not in q.store.periodic_state()


def serve_until(backend: Backend, ran: list[str], enough: Any) -> None:
    """A consumer of the queue, run until ``enough()`` (ids of the jobs run into ``ran``)."""
    consumer = gq.Consumer(backend.queue, client=backend.client(), heartbeat_poll_interval=1)
    worker = gevent.spawn(consumer.run, lambda job: ran.append(job.id))
    try:
        wait_until(enough, 20, message="occurrences")
    finally:
        consumer.stop()
        assert worker.get(timeout=15) is None


def wait_server_seconds(q: gq.Queue, seconds: float) -> float:
    """Wait until the server's clock has moved ``seconds`` on; when the wait began."""
    began = q.store.server_time()
    wait_until(lambda: q.store.server_time() >= began + seconds, 10)
    return began


def test_a_restarted_worker_goes_on_from_the_cursor_as_with_a_code_schedule(
    backend: Backend,
) -> None:
    # A deploy restarts every worker: the occurrences due meanwhile (within the late
    # limit of 10 s) are enqueued, one each, as a schedule given in code's are.
    q = queue_of(backend)
    q.add_periodic("rt", "stamp", every=1, args=["rt"])
    ran: list[str] = []
    serve_until(backend, ran, lambda: len(ran) >= 2)
    wait_server_seconds(q, 2.5)  # two due, no worker
    serve_until(backend, ran, lambda: len(ran) >= 5)
    assert_consecutive(ran)  # none skipped over the restart


def test_a_worker_started_after_a_resume_does_not_catch_up_what_was_paused(
    backend: Backend,
) -> None:
    q = queue_of(backend)
    q.add_periodic("rt", "stamp", every=1, args=["rt"])
    ran: list[str] = []
    serve_until(backend, ran, lambda: len(ran) >= 2)
    q.pause_periodic("rt")
    wait_server_seconds(q, 2.5)  # two due, paused
    q.resume_periodic("rt")
    resumed_at = q.store.server_time()
    before = len(ran)
    serve_until(backend, ran, lambda: len(ran) > before)  # a worker that never saw the pause
    assert min(occurrence_of(i) for i in ran[before:]) > resumed_at - 1  # (before: caught up)


def test_gq_periodic_refuses_bad_input_with_exit_2(redis_server: RedisServer) -> None:
    env = env_for(redis_server.url, "periodic-cli-bad")
    base = ["periodic", "add", "--name", "x", "--task", "t"]
    for extra, reason in ((["--cron", "61 * * * *"], "bad cron rule"),
                          (["--every", "0"], "whole number of seconds"),
                          (["--every", "soon"], "--every must be"),
                          (["--every", "1", "--args", "{"], "--args is not JSON"),
                          (["--every", "1", "--args", "{}"], "must be a JSON array")):
        shown = run(ADMIN, *base, *extra, env=env)
        assert shown.returncode == 2 and reason in shown.stderr, (extra, shown)
    assert gq.Queue("periodic-cli-bad", redis_server.url).periodic_schedules() == []


@pytest.mark.timeout(120)
def test_two_gq_workers_run_a_schedule_added_paused_resumed_and_removed_by_gq(
    redis_server: RedisServer, tmp_path: Any
) -> None:
    import uuid

    queue = f"periodic-rt-{uuid.uuid4().hex[:8]}"
    env = env_for(redis_server.url, queue, GQ_TEST_TASK_QUEUE=queue)
    client = redis_server.client()
    workers = [Worker(tmp_path, "tests.periodic_runtime_app:app", "--heartbeat-poll-interval",
                      "1", env=env) for _ in range(2)]  # fmt: skip

    def ran() -> list[str]:
        return [i.decode() for i in client.lrange(f"{queue}:ran", 0, -1)]

    def logged(text: str) -> bool:
        return all(w.output.count(text) >= 1 for w in workers)

    try:
        added = run(ADMIN, "periodic", "add", "--name", "rt", "--task", "stamp", "--every", "1s",
                    "--args", '["rt"]', env=env)  # fmt: skip
        assert added.returncode == 0 and "rt: added" in added.stdout, added
        wait_until(lambda: logged("periodic rt: runs every 1s"), 20, message="taken up")
        wait_until(lambda: len(ran()) >= 4, 30, message="four occurrences")
        listed = run(ADMIN, "periodic", "list", "--json", env=env)
        [line] = [json.loads(x) for x in listed.stdout.splitlines()]
        assert (line["name"], line["source"], line["task"], line["paused"]) == (
            "rt", "runtime", "stamp", False)
        assert run(ADMIN, "periodic", "pause", "rt", env=env).returncode == 0
        wait_until(lambda: logged("periodic rt: paused or removed"), 20, message="paused")
        paused_at = float(client.time()[0])
        wait_until(lambda: float(client.time()[0]) >= paused_at + 3, 10)
        before = ran()
        assert_consecutive(before)
        assert max(map(occurrence_of, before)) <= paused_at
        assert run(ADMIN, "periodic", "resume", "rt", env=env).returncode == 0
        wait_until(lambda: len(ran()) > len(before), 30, message="an occurrence after resume")
        assert min(occurrence_of(i) for i in ran()[len(before):]) > paused_at + 2
        removed = run(ADMIN, "periodic", "remove", "rt", env=env)
        assert removed.returncode == 0 and "rt: removed" in removed.stdout
        wait_until(lambda: all(w.output.count("periodic rt: paused or removed") >= 2
                               for w in workers), 20, message="removed")  # fmt: skip
        assert run(ADMIN, "periodic", "remove", "rt", env=env).returncode == 1
    finally:
        for w in workers:
            w.stop()
    everything = ran()
    assert len(set(everything)) == len(everything), everything  # exactly once each
    client.delete(f"{queue}:ran")
    BothSides(client, queue).delete_queue()
