"""gq.testing with ``async def`` tasks (issue 31, defect 3): the coroutine is awaited to
its end under ``eager`` and ``worker()``, so a failing async task fails its test, its
value is the get() value, and its retries run; also from inside a running event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import gq
from gq.tasks import testing

app = gq.App(url="redis://127.0.0.1:1/0")  # nothing listens there: no Redis is used
ran: list[str] = []


@app.task(result_ttl=60)
async def double(x: int) -> int:
    await asyncio.sleep(0)
    ran.append("double")
    return 2 * x


@app.task
async def broken() -> None:
    await asyncio.sleep(0)
    raise ValueError("async failure")


@app.task(retries=2, result_ttl=60)
async def flaky() -> str:
    await asyncio.sleep(0)
    if gq.current_job().attempt == 0:
        raise gq.Retry(after=3600)
    return "second time"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def test_eager_get_returns_the_awaited_value() -> None:
    with testing.eager(app):
        assert double.enqueue(21).get() == 42
    assert ran == ["double"]


def test_eager_a_failing_async_task_raises() -> None:
    with testing.eager(app):
        result = broken.enqueue()
        with pytest.raises(ValueError, match="async failure"):
            result.get()


def test_eager_inside_a_running_event_loop() -> None:
    async def body() -> tuple[Any, Any]:
        with testing.eager(app):
            value = double.enqueue(5).get()
            failing = broken.enqueue()
            awaited = await (await double.aenqueue(1)).aget()
        with pytest.raises(ValueError, match="async failure"):
            failing.get()
        return value, awaited

    assert asyncio.run(body()) == (10, 2)


def test_worker_runs_the_coroutine_and_keeps_its_value() -> None:
    with testing.worker(app) as worker:
        result = double.enqueue(4)
        [outcome] = worker.drain()
        assert (outcome.status, outcome.value, outcome.runs) == ("done", 8, 1)
        assert result.get(timeout=5) == 8
    assert ran == ["double"]


def test_worker_a_failing_async_task_fails() -> None:
    with testing.worker(app) as worker:
        broken.enqueue()
        [outcome] = worker.drain()
        assert outcome.status == "failed"
        assert outcome.error is not None and "async failure" in outcome.error


def test_worker_retries_an_async_task() -> None:
    with testing.worker(app) as worker:
        result = flaky.enqueue()
        [outcome] = worker.drain()
        assert (outcome.status, outcome.runs, outcome.value) == ("done", 2, "second time")
        assert result.get(timeout=5) == "second time"


def test_worker_drains_inside_a_running_event_loop() -> None:
    async def body() -> list[testing.Outcome]:
        with testing.worker(app) as worker:
            double.enqueue(3)
            broken.enqueue()
            return worker.drain()

    outcomes = asyncio.run(body())
    assert [(o.status, o.value) for o in outcomes][0] == ("done", 6)
    assert outcomes[1].status == "failed"
