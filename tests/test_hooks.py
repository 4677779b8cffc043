"""Hooks on the app (SPEC section 18): on_enqueue, before_job, after_job, as callables or
context managers; a hook's failure changes nothing; every log line of a job carries its
id, task and queue."""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq.tasks.hooks import Attempt, Enqueueing
from gq.tasks.joblog import JobFields
from tests.cli_support import WORKER, env_for, log_lines, run
from tests.helpers import Backend, RedisServer, delete_keys, wait_until
from tests.task_support import dead, make_app, run_app, stored

__all__ = ["run_app"]  # the fixture


def test_on_enqueue_sees_each_job_and_its_headers_reach_the_worker(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    seen: list[Enqueueing] = []
    ran: list[Any] = []

    @app.on_enqueue
    def stamp(event: Enqueueing) -> None:
        seen.append(event)
        event.headers["tenant"] = "acme"

    @app.task
    def deliver(url: str) -> None:
        job = gq.current_job()
        assert job is not None
        ran.append((url, dict(job.headers)))

    results = deliver.using(headers={"given": "1"}).enqueue_many([("a",), ("b",)])
    assert [e.id for e in seen] == [r.id for r in results]
    assert [(e.task, e.queue, list(e.args)) for e in seen] == [
        (deliver.name, backend.queue, ["a"]),
        (deliver.name, backend.queue, ["b"]),
    ]
    run_app(app)
    wait_until(lambda: len(ran) == 2)
    assert sorted(ran) == [("a", {"given": "1", "tenant": "acme"}),
                           ("b", {"given": "1", "tenant": "acme"})]  # fmt: skip


def test_on_enqueue_context_manager_wraps_the_write_and_sees_its_failure(backend: Backend) -> None:
    app = make_app(backend)
    events: list[tuple[str, Any]] = []

    @app.on_enqueue
    @contextlib.contextmanager
    def around(event: Enqueueing) -> Iterator[None]:
        events.append(("enter", event.id))
        try:
            yield
        except BaseException as exc:
            events.append(("error", type(exc).__name__))
            raise
        events.append(("exit", stored(backend, event.id) is not None))

    @app.task
    def one() -> None: ...

    result = one.enqueue()
    assert events == [("enter", result.id), ("exit", True)]  # exited after the write
    events.clear()
    with pytest.raises(gq.JobAlreadyExistsError):
        one.using(id=result.id).enqueue()
    assert events == [("enter", result.id), ("error", "JobAlreadyExistsError")]


def test_before_and_after_job_see_outcome_duration_and_result(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend, retries=1)
    before: list[tuple[str, int]] = []
    after: list[Attempt] = []
    app.before_job(lambda attempt: before.append((attempt.task, attempt.attempt)))
    app.after_job(after.append)

    @app.task(name="ok")
    def ok(n: int) -> int:
        return n * 2

    @app.task(name="boom")
    def boom() -> None:
        raise ValueError("bad")

    @app.task(name="again", retries=1)
    def again() -> None:
        job = gq.current_job()
        assert job is not None
        if job.attempt == 0:
            raise gq.Retry(after=0)

    ok.enqueue(21)
    failed = boom.enqueue()
    again.enqueue()
    run_app(app)
    wait_until(lambda: len(after) == 5)  # ok, boom twice, again twice
    by_task = {(a.task, a.attempt): a for a in after}
    assert by_task["ok", 0].outcome == "done" and by_task["ok", 0].result == 42
    assert by_task["ok", 0].args == [21] and by_task["ok", 0].duration >= 0
    assert by_task["boom", 0].outcome == "failed"
    assert isinstance(by_task["boom", 1].error, ValueError)
    assert by_task["again", 0].outcome == "retry" and by_task["again", 1].outcome == "done"
    assert sorted(before) == sorted(by_task)
    wait_until(lambda: failed.id in dead(backend))


def test_before_job_context_manager_wraps_the_run_inside_the_jobs_context(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    events: list[Any] = []

    @app.before_job
    @contextlib.contextmanager
    def around(attempt: Attempt) -> Iterator[None]:
        current = gq.current_job()
        events.append(("enter", current.id if current else None))
        try:
            yield
        except ValueError as exc:
            events.append(("error", str(exc)))
            raise
        events.append(("exit", attempt.id))

    @app.task(retries=0)
    def fails() -> None:
        events.append("ran")
        raise ValueError("bad")

    result = fails.enqueue()
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    assert events == [("enter", result.id), "ran", ("error", "bad")]


def test_a_failing_hook_is_logged_and_changes_nothing(
    backend: Backend, run_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(backend)
    ran: list[int] = []

    def broken(event: Any) -> None:
        raise RuntimeError("integration bug")

    app.on_enqueue(broken)
    app.before_job(broken)
    app.after_job(broken)

    @app.task
    def work(n: int) -> None:
        ran.append(n)

    result = work.enqueue(7)  # enqueued all the same
    run_app(app)
    wait_until(lambda: ran == [7])
    wait_until(lambda: stored(backend, result.id) is None)  # acknowledged: it ran
    assert dead(backend) == {}
    failures = [r for r in caplog.records if r.name == "gq.hooks"]
    assert len(failures) == 3 and all("integration bug" in r.exc_text for r in failures)


def test_a_header_a_hook_sets_that_is_not_str_is_dropped_with_a_logged_error(
    backend: Backend, run_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As a hook that raises changes nothing (docs/decisions.md): the job is enqueued with
    the headers the hooks set well, and the bad one's error names the hook and header."""
    app = make_app(backend)
    ran: list[dict[str, str]] = []

    @app.on_enqueue
    def tenant(event: Enqueueing) -> None:
        event.headers["tenant"] = 42  # type: ignore[assignment]  # the bug under test
        event.headers["given"] = b"x"  # type: ignore[assignment]  # over the caller's
        event.headers["trace"] = "t1"

    @app.on_enqueue
    def replaces(event: Enqueueing) -> None:
        event.headers = ["not", "a", "map"]  # type: ignore[assignment]

    @app.task
    def work() -> None:
        job = gq.current_job()
        assert job is not None
        ran.append(dict(job.headers))

    result = work.using(headers={"given": "1"}).enqueue()  # no TypeError
    run_app(app)
    wait_until(lambda: ran == [{"given": "1", "trace": "t1"}])
    wait_until(lambda: stored(backend, result.id) is None)
    errors = [r.getMessage() for r in caplog.records if r.name == "gq.hooks"]
    assert any("tenant" in m and "'tenant'" in m and "42" in m for m in errors), errors
    assert any("'given'" in m for m in errors) and any("replaces" in m for m in errors)


def test_an_app_without_job_hooks_runs_the_plain_path(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def work() -> None: ...

    entry = app.dispatcher()._entries[work.name]
    assert entry.runs == entry.run
    app.after_job(lambda attempt: None)
    entry = app.dispatcher()._entries[work.name]  # rebuilt by the registration
    assert entry.runs == entry.hooked


def test_async_task_runs_between_hooks(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    after: list[Attempt] = []
    app.after_job(after.append)

    @app.task
    async def double(n: int) -> int:
        return n * 2

    double.enqueue(4)
    run_app(app)
    wait_until(lambda: len(after) == 1)
    assert (after[0].outcome, after[0].result) == ("done", 8)


def test_every_log_line_of_a_job_carries_its_id_task_and_queue(
    backend: Backend, run_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(backend)
    caplog.handler.addFilter(JobFields())
    caplog.set_level(logging.INFO)
    task_log = logging.getLogger("tests.hooks.task")

    @app.task(name="noisy", retries=0)
    def noisy() -> None:
        task_log.info("working")
        raise ValueError("bad")

    result = noisy.enqueue()
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    wait_until(lambda: any(r.name == "gq.processor" for r in caplog.records))
    lines = [r for r in caplog.records if r.name in ("tests.hooks.task", "gq.processor")]
    assert {r.name for r in lines} == {"tests.hooks.task", "gq.processor"}
    for record in lines:
        fields = (record.gq_job_id, record.gq_task, record.gq_queue)  # type: ignore[attr-defined]
        assert fields == (result.id, "noisy", backend.queue), record.getMessage()
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", None, None)
    assert JobFields().filter(outside) and not hasattr(outside, "gq_job_id")


def test_the_commands_formats_show_the_job_of_a_line() -> None:
    from gq.cli.logs import JsonFormatter, TextFormatter

    record = logging.LogRecord("gq.x", logging.ERROR, __file__, 1, "failed", None, None)
    record.__dict__.update(gq_job_id="j-1", gq_task="deliver", gq_queue="hooks")
    assert TextFormatter([]).format(record).endswith("failed job=j-1 task=deliver queue=hooks")
    entry = json.loads(JsonFormatter([]).format(record))
    assert (entry["job_id"], entry["task"], entry["queue"]) == ("j-1", "deliver", "hooks")


@pytest.mark.real_redis
def test_gq_worker_json_lines_name_the_job(redis_server: RedisServer) -> None:
    queue = f"hooks_cli_{uuid.uuid4().hex[:8]}"
    app = gq.App(url=redis_server.url, queue=queue)
    failing = app.task(name="fails", retries=0)(lambda: None)  # tests/task_app.py's task
    try:
        result = failing.enqueue()
        shown = run(WORKER, "tests.task_app:app", "--burst", "--log-format", "json",
                    env=env_for(redis_server.url, None, GQ_TEST_TASK_QUEUE=queue))  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        entries = [json.loads(line) for line in log_lines(shown.stderr) if line.startswith("{")]
        failed = [e for e in entries if e["logger"] == "gq.processor"]
        assert len(failed) == 1, entries
        line = failed[0]
        assert (line["job_id"], line["task"], line["queue"]) == (result.id, "fails", queue)
        assert all("job_id" not in e for e in entries if e is not failed[0])  # the others: none
    finally:
        delete_keys(redis_server.client(), f"{queue}*")
