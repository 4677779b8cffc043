"""A running task's progress (issue 34): ``current_job().progress(fraction, note)``,
rate-limited on the client, read by ``Result.progress()``, ``gq job`` and job_view while
the job runs, and ignored once it ended or by another attempt."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import gevent.event
import pytest

import gq
from gq.cli.job_cmd import render
from gq.store.keys import QueueKeys
from gq.store.progress import write_progress
from gq.store.tasks import TaskQueue
from gq.tasks import progress
from gq.tasks.dispatch import CurrentJob
from gq.tasks.jobview import job_view
from tests.cli_support import ADMIN, Worker, env_for, run
from tests.helpers import Backend, RedisServer, wait_until
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("fraction", [-0.01, 1.5, float("nan"), float("inf")])
def test_a_fraction_out_of_0_to_1_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="from 0 to 1"):
        progress.check(fraction, "")


@pytest.mark.parametrize("fraction", ["0.5", None, True])
def test_a_fraction_that_is_not_a_number_is_refused(fraction: Any) -> None:
    with pytest.raises(TypeError, match="fraction must be a number"):
        progress.check(fraction, "")


def test_a_bad_note_is_refused() -> None:
    with pytest.raises(TypeError, match="note must be a str"):
        progress.check(0.5, 3)
    with pytest.raises(ValueError, match="at most 200"):
        progress.check(0.5, "x" * 201)
    assert progress.check(1, "done") == (1.0, "done")


def test_a_running_task_s_progress_is_read_until_it_ends(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    reported, release = gevent.event.Event(), gevent.event.Event()

    @app.task(result_ttl=60)
    def files() -> str:
        job = gq.current_job()
        assert job is not None
        job.progress(0.42, note="3 of 7 files")
        reported.set()
        release.wait(20)
        return "ok"

    r = files.enqueue()
    assert r.progress() is None  # (not running yet)
    run_app(app)
    reported.wait(10)
    assert wait_until(r.progress) == (0.42, "3 of 7 files")
    assert asyncio.run(r.aprogress()) == (0.42, "3 of 7 files")
    view = job_view(TaskQueue(backend.client(), backend.queue), r.id)
    assert view["status"] == "running"
    assert view["progress"] == {"fraction": 0.42, "note": "3 of 7 files"}
    assert "progress:  42% 3 of 7 files" in render(view)
    release.set()
    assert r.get(timeout=10) == "ok"
    assert r.progress() is None  # the key may live on; the job's end hides it
    assert job_view(TaskQueue(backend.client(), backend.queue), r.id)["progress"] is None


def test_progress_of_another_attempt_is_ignored(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    started, release = gevent.event.Event(), gevent.event.Event()

    @app.task(result_ttl=60)
    def quiet() -> None:
        started.set()
        release.wait(20)

    r = quiet.enqueue()
    run_app(app)
    started.wait(10)
    wait_until(lambda: r.status() == "running")
    write_progress(backend.client(), backend.queue, r.id, (0.9, "attempt 3's", 3))
    assert r.progress() is None
    write_progress(backend.client(), backend.queue, r.id, (0.1, "this run's", 0))
    assert r.progress() == (0.1, "this run's")
    release.set()
    r.get(timeout=10)


def test_a_tight_loop_of_1000_reports_costs_fewer_than_10_commands(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = backend.client()
    sent: list[Any] = []
    real = client.execute_command

    def counting(*args: Any, **options: Any) -> Any:
        sent.append(args[0])
        return real(*args, **options)

    monkeypatch.setattr(client, "execute_command", counting)
    monkeypatch.setattr(progress, "_client_of", lambda queue: client)
    job = CurrentJob(f"loop-{uuid.uuid4().hex[:8]}", 0, backend.queue, "t", {})
    for i in range(1000):
        job.progress(i / 1000, note=f"{i} of 1000")
    assert 1 <= len(sent) < 10, sent
    assert set(sent) <= {"EVALSHA", "SCRIPT LOAD"}  # progress.lua (its SET and, if on, its event)
    key = QueueKeys(backend.queue).progress(job.id)
    assert json.loads(backend.client().get(key))["a"] == 0
    assert 0 < backend.client().pttl(key) <= progress_ttl_ms()


def progress_ttl_ms() -> int:
    from gq.store.progress import PROGRESS_TTL

    return int(PROGRESS_TTL * 1000)


def test_a_report_after_the_interval_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[tuple[float, str, int]] = []
    monkeypatch.setattr(progress, "_client_of", lambda queue: object())
    monkeypatch.setattr(progress, "write_progress", lambda c, q, i, report: writes.append(report))
    reporter = progress.Reporter(("q", "id", 0))
    reporter.report(0.1, "a", now=100.0)
    reporter.report(0.2, "b", now=100.0 + progress.INTERVAL / 2)  # kept, not written
    reporter.report(0.3, "c", now=100.0 + progress.INTERVAL)
    assert writes == [(0.1, "a", 0), (0.3, "c", 0)]
    assert reporter.latest == (0.3, "c")


def test_gq_worker_s_task_progress_is_read_from_another_process(
    redis_server: RedisServer, tmp_path: Any
) -> None:
    queue = f"progress-{uuid.uuid4().hex[:8]}"
    env = env_for(redis_server.url, queue, GQ_TEST_TASK_QUEUE=queue)
    app = gq.App(queue=queue, url=redis_server.url)
    steps = app.task(name="steps", result_ttl=60)(lambda total: total)
    r = steps.enqueue(7)
    worker = Worker(tmp_path, "tests.progress_app:app", env=env)
    try:
        found = wait_until(r.progress, 20, message="the worker's progress")
        assert found[0] in {i / 7 for i in range(7)} and found[1].endswith("of 7 files")
        shown = run(ADMIN, "job", r.id, "--json", env=env)
        assert json.loads(shown.stdout)["progress"]["note"].endswith("of 7 files"), shown
        redis_server.client().rpush(f"{queue}:release", "go")
        assert r.get(timeout=20) == 7
        assert r.progress() is None
    finally:
        worker.stop()
        redis_server.client().delete(f"{queue}:release")


def test_under_eager_with_no_redis_a_report_is_checked_and_not_written() -> None:
    import gq.testing

    app = gq.App(queue="progress-eager")
    refused: list[str] = []

    @app.task(name="eager_steps")
    def eager_steps() -> int:
        job = gq.current_job()
        assert job is not None
        job.progress(0.5, "half")
        try:
            job.progress(2, "too far")
        except ValueError as exc:
            refused.append(str(exc))
        return 1

    with gq.testing.eager(app):
        assert eager_steps.enqueue().get() == 1
    assert refused == ["progress: fraction must be from 0 to 1, not 2"]
