"""The statuses the issue found wrong in hand-made status code (SPEC section 16): a job
sent to dead by the recovery limit, one trimmed from dead, one cancelled while waiting."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from gq.store.tasks import TaskQueue
from tests.helpers import Backend
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture


def _crash_until_dead(queue: TaskQueue, job_id: str) -> None:
    """The job is taken by a consumer that dies, again and again, until the recovery
    limit sends it to dead (recover.lua), as a job that crashes its worker would."""
    for _ in range(5):
        queue.register("crashing")
        taken = queue.fetch("crashing", 1)
        assert [i for i, _ in taken] in ([job_id], [])
        queue.recover("custodian", [queue.keys.inflight("crashing")], timeout=-1, max_jobs=10,
                      max_recoveries=1, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
        if queue.client.zscore(queue.keys.dead, job_id) is not None:
            return
    raise AssertionError("never sent to dead")


def test_sent_to_dead_by_the_recovery_limit_is_failed(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def crashes() -> None: ...

    r = crashes.enqueue()
    _crash_until_dead(TaskQueue(backend.client(), backend.queue), r.id)
    assert r.status() == "failed"
    with pytest.raises(gq.TaskFailed, match="recovered 1 times") as caught:
        r.get(timeout=5)
    assert caught.value.status == "failed"


def test_trimmed_from_dead_stays_failed_while_its_result_is_kept(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60, retries=0)
    def kept() -> None:
        raise RuntimeError("kept error")

    @app.task(retries=0)
    def unkept() -> None:
        raise RuntimeError("unkept error")

    a, b = kept.enqueue(), unkept.enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed):
        a.get(timeout=10)
    queue = TaskQueue(backend.client(), backend.queue)
    from tests.helpers import wait_until

    wait_until(lambda: queue.client.zscore(queue.keys.dead, b.id) is not None)
    queue.tidy("0", dead_max_jobs=0, dead_max_age=3600)  # trims every dead job
    assert queue.client.zcard(queue.keys.dead) == 0
    assert a.status() == "failed"
    with pytest.raises(gq.TaskFailed, match="kept error"):
        a.get(timeout=1)
    assert b.status() == "missing"  # no result kept: gq knows nothing of it any more


def test_cancelled_while_running_is_missing_and_the_waiter_learns_it(
    backend: Backend, run_app: Any
) -> None:
    import gevent

    app = make_app(backend)
    started = gevent.event.Event()

    @app.task(result_ttl=60)
    def long() -> None:
        started.set()
        gevent.sleep(30)

    r = long.enqueue()
    waiter = gevent.spawn(r.get, 20)
    run_app(app)
    assert started.wait(10)
    assert r.status() == "running"
    assert r.cancel()
    waiter.join(10)
    assert isinstance(waiter.exception, gq.ResultUnavailable)
    assert r.status() == "missing"
