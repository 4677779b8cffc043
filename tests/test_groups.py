"""Groups (SPEC section 17), at the scripts: where grouped jobs wait, fair turns, limits
per group, releases, bounded work with 10,000 groups, bad input; fakeredis and real Redis."""

from __future__ import annotations

import math
from typing import Any

import pytest

import gq
from gq.store.groupkeys import group_key
from tests.group_support import fetch_all, group_of, held, push, store, waiting
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(120)


def _queue(backend: Backend) -> gq.Queue:
    return gq.Queue(backend.queue, client=backend.client())


def test_grouped_jobs_wait_outside_the_active_list(backend: Backend) -> None:
    assert push(backend, [("a-0", "a"), ("a-1", "a"), ("b-0", "b"), ("p-0", "")]) == [True] * 4
    direct = backend.direct()
    # A curlyq consumer reads the active list: it sees only the ungrouped job.
    assert direct.lrange(f"{backend.queue}:active", 0, -1) == [b"p-0"]
    assert waiting(backend) == {"a": 2, "b": 1}
    assert push(backend, [("a-0", "a")]) == [False]  # an id is one job, grouped or not
    queue = store(backend)
    queue.register("c1")
    ids, state = fetch_all(queue, "c1", 10)
    assert sorted(ids) == ["a-0", "a-1", "b-0", "p-0"] and state == "ok"
    assert held(backend) == {}  # no limit: nothing to count, no bookkeeping per job
    assert direct.hlen(group_key(backend.queue, "of")) == 0
    assert queue.ack("c1", ids) == [True] * 4
    assert waiting(backend) == {}


def test_jobs_of_a_group_under_a_limit_are_counted_while_held(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=10, group="a")
    push(backend, [("a-0", "a"), ("a-1", "a"), ("b-0", "b")])
    queue = store(backend)
    queue.register("c1")
    ids, _ = fetch_all(queue, "c1", 10)
    assert held(backend) == {"a": 2}  # b has no limit of its own, nor every group's
    assert queue.ack("c1", ids) == [True] * 3
    assert held(backend) == {}
    assert backend.direct().hlen(group_key(backend.queue, "of")) == 0


def test_ungrouped_jobs_touch_no_group_key(backend: Backend) -> None:
    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform_many([gq.Job(f"j{i}") for i in range(5)])
    queue = store(backend)
    queue.register("c1")
    ids, _ = fetch_all(queue, "c1", 10)
    assert queue.ack("c1", ids) == [True] * 5
    assert backend.direct().keys(f"{backend.queue}:groups:*") == []


def test_a_big_group_delays_a_small_one_by_one_turn(backend: Backend) -> None:
    push(backend, [(f"big-{i}", "big") for i in range(2000)])
    push(backend, [("small-0", "small")])
    queue = store(backend)
    queue.register("c1")
    ids, _ = fetch_all(queue, "c1", 5)  # the big group had its turn first (4), then the small
    assert ids == [f"big-{i}" for i in range(4)] + ["small-0"]
    ids, _ = fetch_all(queue, "c1", 1000)  # the rest of the big one, alone now
    assert len(ids) == 1000 and all(i.startswith("big-") for i in ids)


def test_fair_turns_share_a_batch_between_groups(backend: Backend) -> None:
    push(backend, [(f"big-{i}", "big") for i in range(500)])
    push(backend, [(f"mid-{i}", "mid") for i in range(5)])
    push(backend, [("one-0", "one")])
    queue = store(backend)
    queue.register("c1")
    ids, _ = fetch_all(queue, "c1", 12)
    taken = [group_of(i) for i in ids]
    assert taken.count("one") == 1 and taken.count("mid") == 5 and taken.count("big") == 6
    assert [i for i in ids if i.startswith("big")] == [f"big-{i}" for i in range(6)]  # in order


def test_a_group_at_its_limit_never_blocks_the_others(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=2)
    push(backend, [(f"a-{i}", "a") for i in range(50)])
    push(backend, [(f"b-{i}", "b") for i in range(3)])
    queue = store(backend)
    queue.register("c1")
    first, _ = fetch_all(queue, "c1", 100)
    assert sorted(first) == ["a-0", "a-1", "b-0", "b-1"]
    again, state = fetch_all(queue, "c1", 100)
    assert again == [] and state == "full"
    assert backend.direct().llen(f"{backend.queue}:signal") == 0  # wait for a release
    queue.ack("c1", ["b-0"])
    assert backend.direct().llen(f"{backend.queue}:signal") == 1  # the release woke it
    ids, _ = fetch_all(queue, "c1", 100)
    assert ids == ["b-2"]
    assert held(backend) == {"a": 2, "b": 2}


def test_one_groups_own_limit_wins_and_reads_back(backend: Backend) -> None:
    queue = _queue(backend)
    queue.set_group_limits(concurrency=1, rate=(1000, 1.0))  # a burst of 100: not binding
    queue.set_group_limits(concurrency=3, group="big")
    assert queue.group_limits() == {"rate": (1000, 1.0), "concurrency": 1}
    assert queue.group_limits("big") == {"rate": None, "concurrency": 3}
    assert queue.group_limits("other") == {"rate": None, "concurrency": None}
    push(backend, [(f"big-{i}", "big") for i in range(5)] + [(f"x-{i}", "x") for i in range(5)])
    q = store(backend)
    q.register("c1")
    ids, _ = fetch_all(q, "c1", 100)
    taken = [group_of(i) for i in ids]
    assert taken.count("big") == 3 and taken.count("x") == 1
    queue.set_group_limits(concurrency=None, group="big")  # back to every group's
    assert queue.group_limits("big") == {"rate": None, "concurrency": None}
    queue.set_group_limits(concurrency=None, rate=None)
    assert queue.group_limits() == {"rate": None, "concurrency": None}


def test_raising_a_limit_unparks_the_groups_at_it(backend: Backend) -> None:
    queue = _queue(backend)
    queue.set_group_limits(concurrency=1)
    push(backend, [(f"g{k}-{i}", f"g{k}") for k in range(3) for i in range(3)])
    q = store(backend)
    q.register("c1")
    assert len(fetch_all(q, "c1", 100)[0]) == 3
    assert fetch_all(q, "c1", 100) == ([], "full")
    queue.set_group_limits(concurrency=2)
    ids, _ = fetch_all(q, "c1", 100)
    assert len(ids) == 3 and {group_of(i) for i in ids} == {"g0", "g1", "g2"}


def test_a_group_rate_limit_spaces_its_starts(backend: Backend) -> None:
    _queue(backend).set_group_limits(rate=(10, 1.0))  # burst of 1, then one per 100 ms
    push(backend, [(f"a-{i}", "a") for i in range(5)] + [(f"b-{i}", "b") for i in range(5)])
    q = store(backend)
    q.register("c1")
    ids, state = fetch_all(q, "c1", 100)
    assert sorted(ids) == ["a-0", "b-0"]
    nothing = q.fetch("c1", 100)
    assert list(nothing) == [] and nothing.state == "wait" and 0 < nothing.wait <= 0.25


def test_group_hold_holds_only_that_group(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=100)  # counted: its group is known from Redis
    push(backend, [("a-0", "a"), ("a-1", "a"), ("b-0", "b"), ("b-1", "b")])
    q = store(backend)
    q.register("c1")
    ids, _ = fetch_all(q, "c1", 10)
    assert sorted(ids) == ["a-0", "a-1", "b-0", "b-1"]
    message = gq.job.encode(gq.Job("a-0"))
    assert q.retry("c1", "a-0", message, 30, hold=30, group_hold=True)
    push(backend, [("a-2", "a"), ("b-2", "b")])
    ids, _ = fetch_all(q, "c1", 10)
    assert ids == ["b-2"]  # group a is held; group b and the queue are not
    flow = backend.direct().hget(f"{backend.queue}:flow", "hold_until")
    assert flow is None
    report = _queue(backend).groups()
    (a,) = [row for row in report["busiest"] if row["group"] == "a"]
    assert 25 < a["held_back_seconds"] <= 30


def test_a_retried_job_comes_back_into_its_group(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=1)
    push(backend, [("a-0", "a"), ("a-1", "a")])
    q = store(backend)
    q.register("c1")
    assert fetch_all(q, "c1", 10)[0] == ["a-0"]
    assert q.retry("c1", "a-0", gq.job.encode(gq.Job("a-0", attempt=1)), 0)
    assert held(backend) == {}
    assert fetch_all(q, "c1", 10)[0] == ["a-1"]
    assert q.enqueue_due(100) == 1
    assert backend.direct().llen(f"{backend.queue}:active") == 0  # into its group, not active
    assert waiting(backend) == {"a": 1}
    q.ack("c1", ["a-1"])
    assert fetch_all(q, "c1", 10)[0] == ["a-0"]


def test_a_retried_task_job_of_an_unlimited_group_comes_back_into_it(backend: Backend) -> None:
    app = gq.App(client=backend.client(), queue=backend.queue)

    @app.task(group="free")
    def work() -> None: ...

    job_id = work.enqueue().id
    q = store(backend)
    q.register("c1")
    assert fetch_all(q, "c1", 10)[0] == [job_id]
    message = backend.direct().hget(q.keys.data, job_id)
    assert q.retry("c1", job_id, message, 0)  # its group read from its envelope
    assert q.enqueue_due(100) == 1
    assert waiting(backend) == {"free": 1}
    assert backend.direct().llen(q.keys.active) == 0


def test_a_recovered_job_of_an_unlimited_group_runs_again_from_the_queue(
    backend: Backend,
) -> None:
    # Not counted, so its group is not known at recovery: it is queued as an ungrouped job
    # (run again, without its group's turn), never lost (docs/decisions.md).
    push(backend, [("a-0", "a")])
    q = store(backend)
    q.register("dead")
    assert fetch_all(q, "dead", 10)[0] == ["a-0"]
    q.register("alive")
    moved = q.recover("alive", [q.keys.inflight("dead")], timeout=-1, max_jobs=100,
                      max_recoveries=5, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
    assert moved == 1
    assert fetch_all(q, "alive", 10)[0] == ["a-0"]


def test_kill_and_requeue_release_the_group(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=2)
    push(backend, [(f"a-{i}", "a") for i in range(4)])
    q = store(backend)
    q.register("c1")
    assert fetch_all(q, "c1", 10)[0] == ["a-0", "a-1"]
    assert q.kill("c1", "a-0", None, dead_max_jobs=100, dead_max_age=3600)
    assert held(backend) == {"a": 1}
    assert q.requeue("c1", ["a-1"]) == 1  # back to the front of its line
    assert held(backend) == {}
    assert fetch_all(q, "c1", 10)[0] == ["a-1", "a-2"]


def test_a_dead_consumers_group_capacity_comes_back_when_recovered(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=2)
    push(backend, [(f"a-{i}", "a") for i in range(4)])
    q = store(backend)
    q.register("dead")
    assert fetch_all(q, "dead", 10)[0] == ["a-0", "a-1"]
    q.register("alive")
    assert fetch_all(q, "alive", 10) == ([], "full")
    moved = q.recover("alive", [q.keys.inflight("dead")], timeout=-1, max_jobs=100,
                      max_recoveries=5, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
    assert moved == 2 and held(backend) == {}
    assert backend.direct().llen(f"{backend.queue}:signal") == 1
    ids, _ = fetch_all(q, "alive", 10)
    assert sorted(ids) == ["a-0", "a-1"]  # the recovered ones, back at the front


def test_a_grouped_job_recovered_twice_runs_alone_from_the_active_list(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=5)
    push(backend, [("a-0", "a"), ("a-1", "a")])
    q = store(backend)
    for crash in ("first", "second"):
        q.register(crash)
        assert sorted(fetch_all(q, crash, 10)[0]) == ["a-0", "a-1"]  # from their group
        q.register("custodian")
        q.recover("custodian", [q.keys.inflight(crash)], timeout=-1, max_jobs=100,
                  max_recoveries=5, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
    # Recovered twice in a row: suspects, in the active list, where fetch isolates them.
    assert sorted(backend.direct().lrange(q.keys.active, 0, -1)) == [b"a-0", b"a-1"]
    assert held(backend) == {} and waiting(backend) == {}
    q.register("idle")
    fetched = q.fetch("idle", 10, idle=True)
    assert len(fetched) == 1 and fetched.state == "suspect"


def test_tidy_releases_a_job_a_curlyq_consumer_acknowledged(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=1)
    push(backend, [("a-0", "a"), ("a-1", "a")])
    q = store(backend)
    q.register("c1")
    assert fetch_all(q, "c1", 10)[0] == ["a-0"]
    direct = backend.direct()  # as curlyq acknowledges: the set and the data hash only
    direct.srem(q.keys.inflight("c1"), "a-0")
    direct.hdel(q.keys.data, "a-0")
    q.tidy("0", dead_max_jobs=100, dead_max_age=3600)
    assert held(backend) == {}
    assert fetch_all(q, "c1", 10)[0] == ["a-1"]


def test_a_job_cancelled_while_it_waits_is_dropped_from_its_line(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=5)
    push(backend, [("a-0", "a"), ("a-1", "a")])
    backend.direct().hdel(f"{backend.queue}:data", "a-0")  # its message gone
    q = store(backend)
    q.register("c1")
    assert fetch_all(q, "c1", 10)[0] == ["a-1"]
    assert held(backend) == {"a": 1}


def test_scheduled_grouped_jobs_join_their_group_when_due(backend: Backend) -> None:
    push(backend, [("a-0", "a"), ("p-0", "")], mode="after", at=0)
    q = store(backend)
    assert q.enqueue_due(100) == 2
    assert backend.direct().lrange(f"{backend.queue}:active", 0, -1) == [b"p-0"]
    assert waiting(backend) == {"a": 1}


def test_ten_thousand_groups_drain_in_bounded_fetches(backend: Backend) -> None:
    count = 10_000
    push(backend, [(f"g{i}-0", f"g{i}") for i in range(count)])
    q = store(backend)
    q.register("c1")
    seen: list[str] = []
    while True:
        ids, _ = fetch_all(q, "c1", 500)
        assert len(ids) <= 500
        if not ids:
            break
        seen += ids
        q.ack("c1", ids)
    assert len(seen) == count and len(set(seen)) == count


def test_ten_thousand_groups_at_their_limit_cost_one_look_each(backend: Backend) -> None:
    _queue(backend).set_group_limits(concurrency=1)
    count = 10_000
    push(backend, [(f"g{i}-{j}", f"g{i}") for i in range(count) for j in range(2)])
    q = store(backend)
    q.register("c1")
    taken = 0
    for _ in range(200):
        ids, state = fetch_all(q, "c1", 1000)
        taken += len(ids)
        if state == "full":
            break
    assert taken == count  # one each, then every group parked: no fetch scans them again
    assert backend.direct().llen(group_key(backend.queue, "ring")) == 0


@pytest.mark.parametrize("bad", ["", "x" * 201, 5, b"bytes", "a\nb", "tab\there"])
def test_bad_group_names_are_refused_before_anything_is_written(backend: Backend, bad: Any) -> None:
    app = gq.App(client=backend.client(), queue=backend.queue)

    @app.task
    def work() -> None: ...

    with pytest.raises(gq.ConfigurationError, match="group"):
        work.using(group=bad).enqueue()
    with pytest.raises(gq.ConfigurationError, match="group"):
        _queue(backend).set_group_limits(concurrency=1, group=bad)
    assert backend.direct().keys(f"{backend.queue}*") == []


@pytest.mark.parametrize("limits", [
    {"concurrency": 0}, {"concurrency": -1}, {"concurrency": 1.5}, {"concurrency": True},
    {"concurrency": math.nan}, {"rate": (0, 1.0)}, {"rate": (10, math.nan)},
    {"rate": (10, -1)}, {"rate": (10, 31 * 86400)}, {"rate": (10**10, 1)}, {"rate": 5},
])  # fmt: skip
def test_bad_group_limits_are_refused(backend: Backend, limits: dict[str, Any]) -> None:
    with pytest.raises(gq.ConfigurationError):
        _queue(backend).set_group_limits(**limits)
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_stats_show_the_busiest_groups(backend: Backend) -> None:
    queue = _queue(backend)
    queue.set_group_limits(concurrency=2)
    push(backend, [(f"big-{i}", "big") for i in range(30)] + [(f"s-{i}", "s") for i in range(3)])
    q = store(backend)
    q.register("c1")
    q.fetch("c1", 3)
    groups = queue.stats()["groups"]
    assert groups["waiting_groups"] == 2
    assert groups["limits"] == {"rate_limit": None, "concurrency_limit": 2}
    first, second = groups["busiest"]
    assert (first["group"], first["waiting"], first["concurrency_limit"]) == ("big", 28, 2)
    assert first["held"] + second["held"] == 3 and second["group"] == "s"


def test_group_metrics_are_opt_in_and_bounded(backend: Backend) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from gq.tasks.group_metrics import GroupCollector

    push(backend, [(f"g{k}-{i}", f"g{k}") for k in range(30) for i in range(k + 1)])
    registry = prometheus_client.CollectorRegistry()
    registry.register(GroupCollector(backend.client(), [backend.queue], top=5))
    text = prometheus_client.generate_latest(registry).decode()
    assert f'gq_groups_waiting{{queue="{backend.queue}"}} 30.0' in text
    waiting = [line for line in text.splitlines()
               if line.startswith("gq_group_jobs") and 'state="waiting"' in line]  # fmt: skip
    assert len(waiting) == 5  # the busiest five only, whatever the number of groups
    assert any('group="g29"' in line and line.endswith(" 30.0") for line in waiting)
    with pytest.raises(ValueError):
        GroupCollector(backend.client(), [backend.queue], top=0)
