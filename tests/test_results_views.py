"""Results made visible (SPEC section 16): the dashboard's job page (status, arguments,
result or error, attempts, times), the queue page's recent results, and ``gq job ID``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import gevent
import pytest

import gq
from gq import dashboard
from tests.cli_support import ADMIN, env_for, run
from tests.dashboard_support import Http, serving
from tests.helpers import Backend, RedisServer, delete_keys
from tests.task_support import run_app

__all__ = ["run_app"]  # the fixture

HOSTILE = "<script>alert(1)</script>"


def _app(client: Any, queue: str) -> gq.App:
    app = gq.App(client=client, queue=queue)

    @app.task(name="greet", result_ttl=60, retries=0)
    def greet(name: str, *, loud: bool = False) -> str:
        if name == "nobody":
            raise ValueError("nobody to greet")
        return f"hello {name}{'!' if loud else ''}"

    return app


@pytest.fixture
def http(backend: Backend) -> Iterator[Http]:
    with serving(dashboard.app(client=backend.client(), queues=[backend.queue])) as address:
        yield Http(address)


def _job_page(http: Http, queue: str, job_id: str) -> Any:
    return http.get(f"/queues/{queue}/job?id={quote(job_id)}")


def test_job_page_shows_status_arguments_and_result(
    backend: Backend, run_app: Any, http: Http
) -> None:
    app = _app(backend.client(), backend.queue)
    ok = app.tasks["greet"].enqueue(HOSTILE, loud=True)
    bad = app.tasks["greet"].enqueue("nobody")
    waiting_page = _job_page(http, backend.queue, ok.id)
    assert waiting_page.status == 200 and ">ready<" in waiting_page.body
    run_app(app)
    assert ok.get(timeout=10).startswith("hello")
    with pytest.raises(gq.TaskFailed):
        bad.get(timeout=10)
    page = _job_page(http, backend.queue, ok.id)
    assert page.status == 200
    assert ">done<" in page.body and "Finished" in page.body
    assert HOSTILE not in page.body and "&lt;script&gt;" in page.body  # escaped, twice over
    assert "loud" in page.body
    failed = _job_page(http, backend.queue, bad.id)
    assert ">failed<" in failed.body and "nobody to greet" in failed.body
    queue_page = http.get(f"/queues/{backend.queue}")
    assert "Recent results" in queue_page.body
    assert ok.id in queue_page.body and bad.id in queue_page.body
    assert HOSTILE not in queue_page.body
    assert _job_page(http, backend.queue, "no-such-id").status == 404


@pytest.mark.timeout(60)
def test_gq_job_prints_the_job_and_its_result_as_text_and_json(
    redis_server: RedisServer,
) -> None:
    queue = "test_results_cli"
    client = redis_server.client()
    app = _app(client, queue)
    try:
        r = app.tasks["greet"].enqueue("ann")
        code, out = _gq_job(redis_server, queue, r.id, "--json")
        assert code == 0 and json.loads(out)["status"] == "ready"
        assert json.loads(out)["args"] == ["ann"]
        consumer = gq.Consumer(queue, client=client, poller_poll_duration=0.5)
        runner = gevent.spawn(consumer.run, app)
        try:
            assert r.get(timeout=10) == "hello ann"
        finally:
            consumer.stop()
            runner.join(10)
        code, out = _gq_job(redis_server, queue, r.id, "--json")
        shown = json.loads(out)
        assert code == 0
        assert (shown["status"], shown["value"], shown["task"]) == ("done", "hello ann", "greet")
        assert shown["finished"] > 0
        code, text = _gq_job(redis_server, queue, r.id)
        assert "status:" in text and "done" in text and "hello ann" in text
        code, _ = _gq_job(redis_server, queue, "no-such-id")
        assert code == 1
    finally:
        delete_keys(client, f"{queue}*")


def _gq_job(server: RedisServer, queue: str, job_id: str, *flags: str) -> tuple[int, str]:
    result = run(ADMIN, "job", job_id, *flags, env=env_for(server.url, queue))
    return result.returncode, result.stdout
