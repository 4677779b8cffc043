"""Workflows (SPEC section 16): chains and groups, each step and callback enqueued once by
the ack of the job before it; a failure stops what follows and get() names it."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from gq.tasks import testing
from tests.helpers import Backend, wait_until
from tests.task_support import dead, make_app, run_app

__all__ = ["run_app"]  # the fixture


def _app(backend: Backend) -> tuple[gq.App, dict[str, Any]]:
    app = make_app(backend)
    calls: dict[str, Any] = {"notify": []}

    @app.task(name="fetch")
    def fetch(url: str) -> str:
        return f"<{url}>"

    @app.task(name="parse")
    def parse(page: str) -> list[str]:
        return [page, page]

    @app.task(name="store", queue=f"{backend.queue}-b")
    def store(items: list[str], table: str) -> str:
        return f"{table}:{len(items)}"

    @app.task(name="square")
    def square(x: int) -> int:
        return x * x

    @app.task(name="boom", retries=0)
    def boom(*args: Any) -> None:
        raise RuntimeError("boom")

    @app.task(name="notify")
    def notify(results: list[int], user: str) -> str:
        calls["notify"].append((results, user))
        return f"{user}:{sum(results)}"

    @app.task(name="ping")
    def ping() -> str:
        return "pong"

    return app, calls


def test_chain_passes_each_value_across_queues(backend: Backend, run_app: Any) -> None:
    app, _ = _app(backend)
    t = app.tasks
    r = gq.chain(t["fetch"].s("a"), t["parse"].s(), t["store"].s(table="pages")).enqueue()
    run_app(app)
    assert r.get(timeout=10) == "pages:2"
    assert r.status() == "done"


def test_si_ignores_the_previous_value_and_then_appends(backend: Backend, run_app: Any) -> None:
    app, _ = _app(backend)
    t = app.tasks
    r = gq.chain(t["fetch"].s("a")).then(t["ping"].si()).enqueue()
    run_app(app)
    assert r.get(timeout=10) == "pong"


def test_failed_step_stops_the_chain_and_get_names_it(backend: Backend, run_app: Any) -> None:
    app, _ = _app(backend)
    t = app.tasks
    r = gq.chain(t["fetch"].s("a"), t["boom"].s(), t["ping"].si()).enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed) as caught:
        r.get(timeout=10)
    assert caught.value.task == "boom" and caught.value.id == r.steps[1][1]
    assert "boom" in caught.value.error
    assert backend.direct().hget(f"{backend.queue}:data", r.steps[2][1]) is None  # never enqueued


def test_group_results_in_order_and_callback_once(backend: Backend, run_app: Any) -> None:
    app, calls = _app(backend)
    t = app.tasks
    r = gq.group(t["square"].s(k) for k in range(5)).enqueue()
    cb = gq.group(t["square"].s(k) for k in range(5)).then(t["notify"].s("ann")).enqueue()
    run_app(app)
    assert r.get(timeout=10) == [0, 1, 4, 9, 16]
    assert cb.get(timeout=10) == "ann:30"
    assert calls["notify"] == [([0, 1, 4, 9, 16], "ann")]


def test_failed_member_stops_the_callback(backend: Backend, run_app: Any) -> None:
    app, calls = _app(backend)
    t = app.tasks
    r = gq.group([t["square"].s(1), t["boom"].s()]).then(t["notify"].s("x")).enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed) as caught:
        r.get(timeout=10)
    assert caught.value.id == r.members[1][1] and caught.value.task == "boom"
    wait_until(lambda: r.members[1][1] in dead(backend))
    assert calls["notify"] == []


def test_group_of_ten_thousand_members(backend: Backend, run_app: Any) -> None:
    app, calls = _app(backend)
    t = app.tasks
    n = 10_000
    r = gq.group(t["square"].s(k) for k in range(n)).then(t["notify"].s("big")).enqueue()
    run_app(app, processor_concurrency=50)
    assert r.get(timeout=120) == f"big:{sum(k * k for k in range(n))}"
    assert len(calls["notify"]) == 1 and len(calls["notify"][0][0]) == n


def test_bad_workflows_are_refused_before_anything_is_written(backend: Backend) -> None:
    app, _ = _app(backend)
    t = app.tasks
    with pytest.raises(ValueError, match="at least one"):
        gq.chain()
    with pytest.raises(ValueError, match="at least one"):
        gq.group([])
    with pytest.raises(TypeError, match="do not bind"):
        gq.chain(t["ping"].s(), t["ping"].s())  # ping takes no previous value
    with pytest.raises(TypeError, match="signatures"):
        gq.chain(t["ping"])  # type: ignore[arg-type]
    assert backend.direct().hlen(f"{backend.queue}:data") == 0


def test_callback_whose_task_is_unknown_at_the_worker(backend: Backend, run_app: Any) -> None:
    producer, _ = _app(backend)
    t = producer.tasks

    @producer.task(name="only-here")
    def only_here(results: list[int]) -> int:
        return len(results)

    worker_app, _ = _app(backend)  # knows every task but "only-here"
    r = gq.group([t["square"].s(2)]).then(only_here.s()).enqueue()
    run_app(worker_app, job_max_attempts=1)
    with pytest.raises(gq.TaskFailed, match="unknown task only-here"):
        r.get(timeout=10)


def _local_app() -> gq.App:
    app = gq.App(url="redis://127.0.0.1:1/0")  # never reached: eager and testing.worker

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="total")
    def total(values: list[int]) -> int:
        return sum(values)

    return app


def _both(app: gq.App) -> tuple[Any, Any]:
    add, total = app.tasks["add"], app.tasks["total"]
    return (gq.chain(add.s(1, 2), add.s(10)).enqueue(),
            gq.group(add.s(1, 1), add.s(2, 2)).then(total.s()).enqueue())  # fmt: skip


def test_chain_and_group_run_under_eager() -> None:
    app = _local_app()
    with testing.eager(app):
        chained, grouped = _both(app)
        assert (chained.get(), grouped.get()) == (13, 6)


def test_chain_and_group_under_testing_worker() -> None:
    app = _local_app()
    with testing.worker(app) as worker:
        chained, grouped = _both(app)
        worker.drain()
        assert (chained.get(timeout=1), grouped.get(timeout=1)) == (13, 6)
