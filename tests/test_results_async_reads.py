"""What a status endpoint reads, sync and async (issue 32): ``status``/``astatus``,
``state``/``astate`` (attempt, last error, group, times), "retrying" while a job backs
off after an error, the same figures in ``gq job`` and the dashboard, ``aenqueue`` of
signatures, chains and groups, and a chain that is "ready" right after its enqueue."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import quote

import gevent
import pytest

import gq
from gq import dashboard
from gq.tasks.jobview import job_view
from tests.dashboard_support import Http, serving
from tests.helpers import Backend, RedisServer, delete_keys
from tests.task_support import make_app, run_app
from tests.test_results_aclient import async_client
from tests.test_results_views import _gq_job

__all__ = ["run_app"]  # the fixture


def _until(check: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        gevent.sleep(0.02)  # (a poll's pause within the deadline)


def _backing_off_app(backend: Backend) -> tuple[gq.App, Any]:
    app = make_app(backend, result_ttl=60)
    runs: list[int] = []

    @app.task(name="flaky", retries=3, group="tenant-a")
    def flaky() -> str:
        runs.append(1)
        raise ValueError("upstream said 503")

    return app, flaky


def test_a_job_backing_off_is_retrying_with_its_attempt_and_error(
    backend: Backend, run_app: Any
) -> None:
    app, flaky = _backing_off_app(backend)
    r = flaky.enqueue()
    assert (r.status(), r.attempt, r.last_error) == ("ready", 0, None)
    run_app(app, job_max_backoff=600.0)
    _until(lambda: r.status() == "retrying", "retrying")
    state = r.state()
    assert (state.status, state.attempt, state.group) == ("retrying", 1, "tenant-a")
    assert r.attempt == 1 and "upstream said 503" in (r.last_error or "")
    assert state.times.enqueued_at is not None
    view = job_view(app._store(backend.queue)[0], r.id)
    assert (view["status"], view["attempt"], view["error"], view["group"]) == (
        "retrying", 1, state.last_error, "tenant-a")  # fmt: skip


def test_async_reads_match_the_sync_ones(backend: Backend, run_app: Any) -> None:
    app = gq.App(client=backend.client(), aclient=async_client(backend), queue=backend.queue,
                 result_ttl=60)  # fmt: skip

    @app.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    state_id: list[str] = []

    async def scenario() -> tuple[Any, ...]:
        r = await double.aenqueue(21)
        state_id.append(r.id)
        before = (await r.astatus(), await r.astate())
        run_app(app)
        value = await r.aget(timeout=10)
        return before, value, await r.astatus(), await r.atimes(), await r.acancel()

    async def rebuilt(job_id: str) -> str:
        return await (await app.aresult(job_id)).astatus()

    (status, state), value, after, times, cancelled = asyncio.run(scenario())
    assert asyncio.run(rebuilt(state_id[0])) == "done"
    assert (status, state.status, state.attempt, state.last_error) == ("ready", "ready", 0, None)
    assert (value, after, cancelled) == (42, "done", False)
    assert times.finished_at is not None and times.started_at is not None


def test_aenqueue_of_signatures_chains_and_groups(backend: Backend, run_app: Any) -> None:
    app = gq.App(client=backend.client(), aclient=async_client(backend), queue=backend.queue,
                 result_ttl=60)  # fmt: skip

    @app.task(name="add")
    def add(x: int, y: int) -> int:
        return x + y

    async def scenario() -> tuple[Any, ...]:
        one = await add.s(1, 2).aenqueue()
        chained = await gq.chain(add.s(1, 1), add.s(10)).aenqueue()
        grouped = await gq.group(add.s(1, 1), add.s(2, 2)).aenqueue()
        ready = (await chained.astatus(), await grouped.astatus())
        run_app(app)
        return (ready, await one.aget(timeout=10), await chained.aget(timeout=10),
                await grouped.aget(timeout=10), await chained.astatus())  # fmt: skip

    ready, one, chained, grouped, done = asyncio.run(scenario())
    assert ready == ("ready", "ready")
    assert (one, chained, grouped, done) == (3, 12, [2, 4], "done")


def test_a_chain_is_ready_right_after_its_enqueue(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(name="step", group="tenant-b")
    def step(x: int = 0) -> int:
        return x

    handle = gq.chain(step.s(1), step.s()).enqueue()
    assert handle.status() == "ready"
    assert handle.results()[0].status() == "ready"


def test_a_group_is_ready_until_a_member_starts(backend: Backend, run_app: Any) -> None:
    app = make_app(backend, result_ttl=60)

    @app.task(name="member")
    def member(x: int) -> int:
        return x

    handle = gq.group(member.s(1), member.s(2)).enqueue()
    assert handle.status() == "ready"
    run_app(app)
    assert handle.get(timeout=10) == [1, 2]
    assert handle.status() == "done"


def test_eager_results_answer_state() -> None:
    app = gq.App(url="fakeredis://eager-state", queue="q")

    @app.task(name="boom")
    def boom() -> None:
        raise KeyError("k")

    from gq import testing

    with testing.eager(app):
        r = boom.enqueue()
    state = r.state()
    assert state.status == "failed" and "KeyError" in (state.last_error or "")


@pytest.mark.parametrize("name", [None, "ok.name"])
def test_main_task_names_are_refused_at_definition(name: str | None) -> None:
    app = gq.App(url="fakeredis://main-names", queue="q")

    def job() -> None: ...

    job.__module__ = "__main__"
    if name is not None:
        assert app.task(name=name)(job).name == name
        return
    with pytest.raises(gq.ConfigurationError, match="__main__.*name="):
        app.task(job)


def test_gq_job_and_the_job_page_show_the_group_and_times(redis_server: RedisServer) -> None:
    queue = "test_results_group_view"
    client = redis_server.client()
    app = gq.App(client=client, queue=queue)

    @app.task(name="hook", group="tenant-c")
    def hook() -> None: ...

    try:
        r = hook.enqueue()
        code, out = _gq_job(redis_server, queue, r.id, "--json")
        shown = json.loads(out)
        assert code == 0 and (shown["group"], shown["status"]) == ("tenant-c", "ready")
        assert shown["enqueued_at"] is not None
        code, text = _gq_job(redis_server, queue, r.id)
        assert "group:" in text and "tenant-c" in text and "enqueued_at:" in text
        site = dashboard.app(client=client, queues=[queue])
        with serving(site) as address:
            page = Http(address).get(f"/queues/{queue}/job?id={quote(r.id)}")
        assert page.status == 200 and ">Group<" in page.body and "tenant-c" in page.body
        assert "Enqueued" in page.body
    finally:
        delete_keys(client, f"{queue}*")


def test_a_chain_or_group_handle_is_rebuilt_from_its_id(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(name="add")
    def add(x: Any, y: int = 0) -> int:  # (x: a group's values, as a callback)
        return (sum(x) if isinstance(x, list) else x) + y

    chained = gq.chain(add.s(1, 1), add.s(10)).enqueue()
    grouped = gq.group(add.s(1, 1), add.s(2, 2)).enqueue()
    called = gq.group(add.s(1, 1), add.s(2, 2)).then(add.s()).enqueue()
    again = [app.workflow(h.id) for h in (chained, grouped, called)]
    assert [type(h) for h in again] == [type(chained), type(grouped), type(called)]
    assert again[0].status() == "ready"
    run_app(app)
    assert [h.get(timeout=10) for h in again] == [12, [2, 4], 6]

    async def rebuilt_status() -> str:
        return await app.workflow(chained.id).astatus()

    assert asyncio.run(rebuilt_status()) == "done"
    with pytest.raises(gq.ResultUnavailable, match="no chain or group"):
        app.workflow("no-such-workflow")
