"""Results and status (SPEC section 16): the outcome written by the ack or the kill, in
the same call; get() that waits without polling; result_ttl per app and per task."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from tests.helpers import Backend, kept_pttl, wait_until
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture


def test_get_returns_the_value_and_status_follows_the_job(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def double(x: int) -> int:
        return 2 * x

    r = double.enqueue(21)
    assert r.status() == "ready"
    run_app(app)
    assert r.get(timeout=10) == 42
    assert r.status() == "done"
    rebuilt = app.result(r.id)
    assert rebuilt.get(timeout=1) == 42
    ttl = kept_pttl(backend.direct(), backend.queue, r.id)
    assert ttl is not None and 0 < ttl <= 60_000


def test_failed_job_raises_task_failed_with_its_error(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60, retries=0)
    def broken() -> None:
        raise ValueError("no such photo")

    r = broken.enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed) as caught:
        r.get(timeout=10)
    assert caught.value.status == "failed"
    assert "no such photo" in caught.value.error
    assert r.status() == "failed"


def test_without_result_ttl_get_says_the_task_keeps_none(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def plain() -> int:
        return 1

    with pytest.raises(gq.ResultUnavailable, match="keeps no results"):
        plain.enqueue().get(timeout=1)


def test_app_default_result_ttl_and_timeout(backend: Backend) -> None:
    app = make_app(backend, result_ttl=30)

    @app.task
    def slow() -> int:
        return 1

    r = slow.enqueue()
    with pytest.raises(TimeoutError):
        r.get(timeout=0.2)
    assert r.status() == "ready"


def test_get_on_an_id_of_another_queue_errs_clearly(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60, queue=f"{backend.queue}-other")
    def elsewhere() -> int:
        return 1

    r = elsewhere.enqueue()
    other_app = make_app(backend)  # knows only its default queue
    with pytest.raises(gq.ResultUnavailable, match="another queue or app"):
        other_app.result(r.id).get(timeout=1)
    assert other_app.result(r.id).status() == "missing"
    assert other_app.result(r.id, queue=f"{backend.queue}-other").status() == "ready"


def test_unserializable_result_is_a_failure_of_the_result_not_rerun(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(result_ttl=60)
    def odd() -> object:
        runs.append(1)
        return {1, 2}

    r = odd.enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed, match="could not be kept") as caught:
        r.get(timeout=10)
    assert caught.value.status == "done"
    assert runs == [1]
    assert backend.direct().hget(f"{backend.queue}:data", r.id) is None  # acknowledged


def test_cancel_while_waiting_makes_it_missing(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def later() -> int:
        return 1

    r = later.using(after=3600).enqueue()
    assert r.status() == "scheduled"
    assert r.cancel()
    assert r.status() == "missing"
    with pytest.raises(gq.ResultUnavailable):
        r.get(timeout=1)


def test_result_expires_on_time(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=0.3)
    def quick() -> int:
        return 7

    r = quick.enqueue()
    run_app(app)
    assert r.get(timeout=10) == 7
    wait_until(lambda: r.status() == "missing", timeout=5)


def test_many_waiters_share_one_subscriber(backend: Backend, run_app: Any) -> None:
    import gevent

    app = make_app(backend)

    @app.task(result_ttl=60)
    def square(x: int) -> int:
        return x * x

    rs = [square.enqueue(i) for i in range(20)]
    waiters = [gevent.spawn(r.get, 10) for r in rs]
    run_app(app)
    gevent.joinall(waiters, timeout=15, raise_error=True)
    assert [w.value for w in waiters] == [i * i for i in range(20)]
    from gq.tasks import waiting

    assert len({id(s[2]) for s in waiting._SUBSCRIBERS.values()}) >= 1


def test_results_under_a_concurrency_limit_drain_every_job(backend: Backend, run_app: Any) -> None:
    # Acks that write a result never ride on a fetch: the poller at the limit must still
    # learn of the room they free.
    app = make_app(backend)

    @app.task(result_ttl=60)
    def one(i: int) -> int:
        return i

    gq.Queue(backend.queue, client=backend.client()).set_limits(concurrency=2)
    rs = one.enqueue_many([(i,) for i in range(60)])
    run_app(app, processor_concurrency=10)
    assert [r.get(timeout=20) for r in rs] == list(range(60))


def test_an_async_task_keeps_its_awaited_value(backend: Backend, run_app: Any) -> None:
    import asyncio

    app = make_app(backend)

    @app.task(result_ttl=60)
    async def later(x: int) -> int:
        await asyncio.sleep(0.01)
        return x + 1

    r = later.enqueue(1)
    run_app(app)
    assert r.get(timeout=10) == 2


def test_result_ttl_0_on_a_task_overrides_the_apps_default(backend: Backend, run_app: Any) -> None:
    app = make_app(backend, result_ttl=60)

    @app.task(result_ttl=0)
    def quiet() -> int:
        return 1

    @app.task
    def kept() -> int:
        return 2

    r = quiet.enqueue()
    with pytest.raises(gq.ResultUnavailable, match="keeps no results"):
        r.get(timeout=1)
    k = kept.enqueue()
    run_app(app)
    assert k.get(timeout=10) == 2
    assert kept_pttl(backend.direct(), backend.queue, r.id) is None
