"""Workflow jobs are jobs like any other (issue 31, defects 4, 5 and 9): group members and
chain steps, the later ones written by the ack script included, wait in their group's line
under its concurrency limit, pass through the app's on_enqueue hooks, and a later step's
relative ``expires`` counts from its own enqueue; fakeredis and a real Redis, with
in-process consumers."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import gevent
import pytest

import gq
from gq.tasks import envelope, testing
from gq.tasks.hooks import Enqueueing
from tests.helpers import Backend, wait_until
from tests.task_support import Running, make_app, run_app

__all__ = ["run_app"]  # the fixture

pytestmark = pytest.mark.timeout(120)


class Peak:
    """How many jobs of each tenant run at once, at most."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.done: list[str] = []

    def run(self, tenant: str, seconds: float = 0.05) -> str:
        self.running[tenant] += 1
        self.peak[tenant] = max(self.peak[tenant], self.running[tenant])
        try:
            gevent.sleep(seconds)
        finally:
            self.running[tenant] -= 1
        self.done.append(tenant)
        return tenant


def _limit(backend: Backend, concurrency: int) -> None:
    gq.Queue(backend.queue, client=backend.client()).set_group_limits(concurrency=concurrency)


def _message(backend: Backend, job_id: str, queue: str | None = None) -> Any:
    raw = backend.direct().hget(f"{queue or backend.queue}:data", job_id)
    return None if raw is None else envelope.decode(gq.job.decode(raw).data)


def test_group_members_keep_their_tenants_limit(backend: Backend, run_app: Running) -> None:
    app = make_app(backend)
    peak = Peak()
    work = app.task(name="work", group=lambda tenant, seconds=0.05: f"t:{tenant}")(peak.run)
    _limit(backend, 1)
    handle = gq.group(work.s("acme") for _ in range(5)).enqueue()
    assert backend.direct().llen(f"{backend.queue}:active") == 0  # in the group's line
    run_app(app, processor_concurrency=10)
    assert handle.get(timeout=30) == ["acme"] * 5
    assert peak.peak["acme"] == 1


def test_chain_steps_and_a_callback_join_their_groups_line(
    backend: Backend, run_app: Running
) -> None:
    app = make_app(backend)
    peak = Peak()
    work = app.task(name="work", group="tenant:acme")(peak.run)

    @app.task(name="gather", group="tenant:acme")
    def gather(results: list[str]) -> int:
        return len(peak.run("acme", 0.0) and results)

    _limit(backend, 1)
    chains = [gq.chain(work.si("acme"), work.si("acme"), work.si("acme")).enqueue()
              for _ in range(3)]  # fmt: skip
    grouped = gq.group(work.si("acme") for _ in range(3)).then(gather.s()).enqueue()
    run_app(app, processor_concurrency=10)
    assert [c.get(timeout=30) for c in chains] == ["acme"] * 3
    assert grouped.get(timeout=30) == 3
    assert peak.peak["acme"] == 1
    later = _message(backend, chains[0].steps[1][1])
    assert later is None or later.opts.get("group") == "tenant:acme"


def test_a_group_function_of_a_step_receiving_the_value_is_refused(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(name="a")
    def a() -> str:
        return "x"

    @app.task(name="b", group=lambda tenant: tenant)
    def b(tenant: str) -> None: ...

    with pytest.raises(gq.ConfigurationError, match="group function"):
        gq.chain(a.s(), b.s()).enqueue()
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_every_workflow_job_passes_through_the_enqueue_hooks(
    backend: Backend, run_app: Running
) -> None:
    app = make_app(backend)
    seen: list[tuple[str, str]] = []

    def stamp(event: Enqueueing) -> None:
        seen.append((event.task, event.id))
        event.headers["traceparent"] = f"00-{event.id}"

    app.on_enqueue(stamp)
    headers: dict[str, Any] = {}

    @app.task(name="step")
    def step(x: int) -> int:
        job = gq.current_job()
        assert job is not None
        headers[job.id] = dict(job.headers or {})
        return x + 1

    c = gq.chain(step.s(1), step.s(), step.s()).enqueue()
    g = gq.group(step.s(1), step.s(2)).then(step.si(0)).enqueue()
    ids = [i for _, i, _ in c.steps] + [m[1] for m in g.members] + [f"{g.id}.then"]
    assert sorted(i for _, i in seen) == sorted(ids)  # all decided at the enqueue
    run_app(app)
    assert c.get(timeout=10) == 4 and g.get(timeout=10) == 1
    wait_until(lambda: len(headers) == len(ids), 10)
    assert headers == {i: {"traceparent": f"00-{i}"} for i in ids}


def test_a_later_steps_relative_expiry_counts_from_its_own_enqueue(
    backend: Backend, run_app: Running
) -> None:
    app = make_app(backend)
    ran: list[str] = []

    @app.task(name="slow")
    def slow() -> str:
        gevent.sleep(1.5)
        ran.append("slow")
        return "late"

    @app.task(name="quick", expires=1.0)
    def quick(value: str) -> str:
        ran.append("quick")
        return value + "!"

    started = time.time()
    c = gq.chain(slow.s(), quick.s()).enqueue()
    run_app(app)
    assert c.get(timeout=20) == "late!"
    assert ran == ["slow", "quick"] and time.time() - started >= 1.5


# -- a chain's status from what is known (issue 31, defect 8; issue 32, item 9) ----------


def _steps_app(backend: Backend) -> gq.App:
    app = make_app(backend)

    @app.task(name="first")
    def first() -> int:
        return 1

    @app.task(name="brief", result_ttl=1)
    def brief(x: int) -> int:
        return x + 1

    @app.task(name="last")
    def last(x: int) -> int:
        return x * 10

    @app.task(name="elsewhere", queue=f"{backend.queue}-b")
    def elsewhere(x: int) -> int:
        return x

    return app


def test_a_chain_reads_done_after_a_middle_steps_result_expired(
    backend: Backend, run_app: Running
) -> None:
    app = _steps_app(backend)
    t = app.tasks
    c = gq.chain(t["first"].s(), t["brief"].s(), t["last"].s()).enqueue()
    run_app(app)
    assert c.get(timeout=10) == 20
    middle = c.results()[1]
    wait_until(lambda: middle.status() == "missing", 10)  # its 1 s result_ttl is over
    assert c.status() == "done"
    assert c.get(timeout=5) == 20


def test_a_chain_whose_later_step_was_cancelled_says_so(
    backend: Backend, run_app: Running
) -> None:
    app = _steps_app(backend)
    t = app.tasks
    c = gq.chain(t["first"].s(), t["elsewhere"].s()).enqueue()
    consumer = gq.Consumer(backend.queue, client=backend.client(), poller_poll_duration=1.0)
    greenlet = gevent.spawn(consumer.run, app)
    try:
        later = c.results()[1]
        wait_until(lambda: later.status() == "ready", 10)  # nobody serves its queue
        assert later.cancel()
        assert c.status() == "missing"
        with pytest.raises(gq.ResultUnavailable, match="cancelled"):
            c.get(timeout=5)
    finally:
        consumer.stop()
        greenlet.join(timeout=10)


def test_a_chain_is_ready_until_its_first_step_started(backend: Backend) -> None:
    app = _steps_app(backend)
    t = app.tasks
    c = gq.chain(t["first"].s(), t["last"].s()).enqueue()
    assert c.status() == "ready"
    with testing.worker(app) as worker:
        c = gq.chain(t["first"].s(), t["last"].s()).enqueue()
        assert c.status() == "ready"
        worker.drain()
        assert (c.status(), c.get(timeout=5)) == ("done", 10)
