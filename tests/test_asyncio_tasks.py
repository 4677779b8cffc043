"""``@app.task`` on an ``async def`` (SPEC section 15): awaited on the worker's asyncio
loop with ``gq.current_job()`` inside it, retried and timed out as sync tasks are, next
to sync tasks of the same app."""

from __future__ import annotations

import asyncio
from typing import Any

import gq
from tests.helpers import Backend, wait_until
from tests.task_support import make_app, run_app, scheduled, stored

__all__ = ["run_app"]  # the fixture


def test_an_async_task_is_awaited_with_its_arguments_and_current_job(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    seen: list[Any] = []

    @app.task
    async def deliver(url: str, tries: int) -> int:
        await asyncio.sleep(0.01)
        seen.append((url, tries, gq.current_job()))
        return 200

    @app.task
    def plain(n: int) -> None:
        seen.append(n)

    result = deliver.enqueue("https://a", tries=2)
    plain.enqueue(7)
    run_app(app)
    wait_until(lambda: len(seen) == 2)
    url, tries, job = next(s for s in seen if isinstance(s, tuple))
    assert (url, tries) == ("https://a", 2)
    assert job is not None and job.id == result.id and job.task == deliver.name
    assert 7 in seen
    wait_until(lambda: stored(backend, result.id) is None)  # acknowledged once awaited


def test_an_async_task_failing_after_an_await_is_retried(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=3)
    async def flaky() -> None:
        await asyncio.sleep(0)
        runs.append(1)
        raise gq.Retry(after=300)

    result = flaky.enqueue()
    run_app(app)
    wait_until(lambda: result.id in scheduled(backend))
    job = stored(backend, result.id)
    assert runs == [1] and job is not None and job.attempt == 1


def test_an_async_task_past_its_timeout_is_cancelled(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    unwound: list[bool] = []

    @app.task(timeout=0.3, retries=3)
    async def slow() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            unwound.append(True)

    result = slow.enqueue()
    run_app(app)
    wait_until(lambda: result.id in scheduled(backend))
    job = stored(backend, result.id)
    assert unwound == [True] and job is not None and job.attempt == 1
