"""Groups (SPEC section 17) with consumers running: tasks grouped per call and from their
arguments, a group concurrency limit over several consumers, RateLimited(group=True),
retries and the CLI; fakeredis and a real Redis."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import gevent
import pytest

import gq
from gq.store.groupkeys import group_key
from gq.tasks import envelope
from tests.cli_support import ADMIN, env_for, run
from tests.group_support import held, waiting
from tests.helpers import Backend, RedisServer, delete_keys, wait_until
from tests.task_support import Running, make_app, run_app

__all__ = ["run_app"]  # the fixture

pytestmark = pytest.mark.timeout(120)


class PerGroup:
    """Counts how many jobs of each group run at once, and when each started."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.starts: dict[str, list[float]] = {}
        self.done: list[str] = []

    def run(self, tenant: str, seconds: float) -> None:
        self.running[tenant] += 1
        self.peak[tenant] = max(self.peak[tenant], self.running[tenant])
        self.starts.setdefault(tenant, []).append(time.monotonic())
        try:
            gevent.sleep(seconds)
        finally:
            self.running[tenant] -= 1
        self.done.append(tenant)


def _envelope_group(backend: Backend, job_id: str) -> Any:
    message = backend.direct().hget(f"{backend.queue}:data", job_id)
    return envelope.decode(gq.job.decode(message).data).opts.get("group")


def test_a_group_per_call_and_from_the_arguments(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(group=lambda tenant, **_: f"tenant:{tenant}" if tenant else None)
    def deliver(tenant: str, n: int = 0) -> None: ...

    first = deliver.enqueue("acme")
    other = deliver.using(group="vip").enqueue("acme")
    none = deliver.enqueue("")
    many = deliver.enqueue_many([("beta",), ("beta",), ("acme",)])
    assert _envelope_group(backend, first.id) == "tenant:acme"
    assert _envelope_group(backend, other.id) == "vip"  # the call's group wins
    assert _envelope_group(backend, none.id) is None
    assert waiting(backend) == {"tenant:acme": 2, "vip": 1, "tenant:beta": 2}
    assert backend.direct().lrange(f"{backend.queue}:active", 0, -1) == [none.id.encode()]
    assert len(many) == 3


def test_a_bad_group_from_the_arguments_writes_nothing(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(group=lambda tenant: tenant)
    def deliver(tenant: Any) -> None: ...

    with pytest.raises(gq.ConfigurationError, match="deliver.*bad group"):
        deliver.enqueue_many([("ok",), (7,)])
    with pytest.raises(gq.ConfigurationError, match="group"):
        app.task(group=5)(lambda: None)
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_a_group_limit_holds_over_consumers_without_blocking_others(
    backend: Backend, run_app: Running
) -> None:
    app = make_app(backend)
    tracker = PerGroup()
    slow = app.task(group=lambda tenant, seconds: tenant)(tracker.run)
    gq.Queue(backend.queue, client=backend.client()).set_group_limits(concurrency=3)
    slow.enqueue_many([("noisy", 0.05)] * 60)
    slow.enqueue_many([("quiet", 0.0)] * 5)
    for _ in range(3):
        run_app(app, processor_concurrency=20)
    wait_until(lambda: tracker.done.count("quiet") == 5, 20)
    assert tracker.done.count("noisy") < 60  # the quiet group did not wait behind the noisy
    wait_until(lambda: len(tracker.done) == 65, 60)
    assert tracker.peak["noisy"] == 3  # the limit, over every consumer, and reached
    wait_until(lambda: held(backend) == {}, 10)


def test_rate_limited_for_a_group_holds_that_group_only(backend: Backend, run_app: Running) -> None:
    app = make_app(backend)
    seen: list[tuple[str, int, float]] = []

    @app.task(group=lambda tenant, n: tenant)
    def call(tenant: str, n: int) -> None:
        seen.append((tenant, n, time.monotonic()))
        if tenant == "limited" and n == 0 and sum(1 for t, _, _ in seen if t == "limited") == 1:
            raise gq.RateLimited(after=1.5, group=True)

    call.enqueue("limited", 0)
    consumer = run_app(app)
    wait_until(lambda: consumer.stats.rate_limited == 1, 10)
    held_at = seen[0][2]
    call.enqueue_many([("limited", 1), ("free", 1), ("free", 2)])
    wait_until(lambda: sum(1 for t, _, _ in seen if t == "free") == 2, 10)
    free_done = max(at for t, _, at in seen if t == "free")
    assert free_done - held_at < 1.3  # the other group ran during the hold
    wait_until(lambda: len(seen) == 5, 20)
    limited = [at for t, n, at in seen if t == "limited"][1:]
    assert all(at - held_at >= 1.3 for at in limited), limited  # its group waited
    assert consumer.stats.failed == 0 and consumer.stats.retried == 0


def test_a_failing_grouped_task_is_retried_within_its_group(
    backend: Backend, run_app: Running
) -> None:
    app = make_app(backend, retries=2)
    runs: list[int] = []

    @app.task(group="only")
    def flaky() -> None:
        runs.append(gq.current_job().attempt)  # type: ignore[union-attr]
        if len(runs) < 2:
            raise RuntimeError("once")

    gq.Queue(backend.queue, client=backend.client()).set_group_limits(concurrency=1)
    flaky.enqueue()
    run_app(app)
    wait_until(lambda: runs == [0, 1], 20)
    wait_until(lambda: held(backend) == {} and waiting(backend) == {}, 10)
    direct = backend.direct()
    assert direct.hlen(group_key(backend.queue, "later")) == 0
    assert direct.hlen(f"{backend.queue}:data") == 0


def test_gq_group_limit_sets_shows_and_refuses(redis_server: RedisServer) -> None:
    name = f"test_groupcli_{uuid.uuid4().hex[:8]}"
    env = env_for(redis_server.url, name)
    try:
        shown = run(ADMIN, "group-limit", "--concurrency", "5", "--rate", "10/1", env=env)
        assert shown.returncode == 0, shown.stderr
        assert "concurrency  5" in shown.stdout and "10 jobs per 1s" in shown.stdout
        own = run(ADMIN, "group-limit", "--group", "tenant:big", "--concurrency", "50", env=env)
        assert own.returncode == 0 and "group tenant:big" in own.stdout
        queue = gq.Queue(name, client=redis_server.client())
        assert queue.group_limits("tenant:big") == {"rate": None, "concurrency": 50}
        assert queue.group_limits() == {"rate": (10, 1.0), "concurrency": 5}
        for bad in (["--concurrency", "0"], ["--rate", "0/1"], ["--clear", "--concurrency", "2"],
                    ["--group", "", "--concurrency", "1"], ["--group", "x" * 201]):  # fmt: skip
            refused = run(ADMIN, "group-limit", *bad, env=env)
            assert refused.returncode == 2, (bad, refused.stderr)
        assert queue.group_limits() == {"rate": (10, 1.0), "concurrency": 5}  # untouched
        cleared = run(ADMIN, "group-limit", "--clear", env=env)
        assert cleared.returncode == 0
        assert queue.group_limits() == {"rate": None, "concurrency": None}
    finally:
        delete_keys(redis_server.client(), f"{name}*")


def test_a_group_rate_limit_paces_a_running_consumer(backend: Backend, run_app: Running) -> None:
    app = make_app(backend)
    tracker = PerGroup()
    paced = app.task(group=lambda tenant, seconds: tenant)(tracker.run)
    gq.Queue(backend.queue, client=backend.client()).set_group_limits(rate=(20, 1.0))
    paced.enqueue_many([("paced", 0.0)] * 30 + [("other", 0.0)] * 30)
    # A long poll: the consumer must be woken by the scripts, never by its poll timing out.
    run_app(app, poller_poll_duration=30.0)
    wait_until(lambda: len(tracker.done) == 60, 20)
    for tenant in ("paced", "other"):
        starts = sorted(tracker.starts[tenant])
        # The burst of 2, then one every 50 ms: each group on its own limit.
        assert starts[-1] - starts[0] >= (30 - 2) * 0.05 * 0.9, tenant


def test_testing_worker_drains_grouped_tasks() -> None:
    from gq.tasks import testing

    app = gq.App(queue="grouped")
    ran: list[str] = []

    @app.task(group=lambda tenant: tenant)
    def work(tenant: str) -> None:
        ran.append(tenant)

    with testing.worker(app) as worker:
        work.enqueue_many([("a",)] * 3 + [("b",)] * 2)
        work.using(group="c").enqueue("c")
        outcomes = worker.drain()
    assert [o.status for o in outcomes] == ["done"] * 6
    assert sorted(ran) == ["a", "a", "a", "b", "b", "c"]
