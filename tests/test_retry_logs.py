"""What a retry writes to the log (issue 32 item 3): a requested retry (gq.Retry) is one
INFO line with its delay; a retried error one WARNING line with the error, its traceback
at DEBUG only; a job that goes to dead logs its traceback with its ERROR line. Before,
every retry was a WARNING "failed" carrying a 20-30 line traceback."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

import gq
from tests.cli_support import Worker, env_for, log_lines
from tests.helpers import Backend, RedisServer, delete_keys, wait_until

pytestmark = pytest.mark.timeout(60)


def fails_first(exc: BaseException, runs: list[int]) -> Any:
    """A handler that raises ``exc`` on its job's first run and succeeds on the next."""

    def handler(job: gq.Job) -> None:
        runs.append(job.attempt)
        if job.attempt == 0:
            raise exc

    return handler


def run_one(backend: Backend, start: Any, handler: Any, **options: Any) -> str:
    """Enqueue one job and wait until it has left the queue for good (done or dead)."""
    options.setdefault("scheduler_poll_interval", 0.1)
    consumer, _ = start(handler, **options)
    job_id = gq.Producer(backend.queue, client=backend.client()).perform(b"x")
    wait_until(lambda: consumer.stats.done + consumer.stats.killed == 1, message="its end")
    return job_id


def about(caplog: pytest.LogCaptureFixture, job_id: str, level: int) -> list[logging.LogRecord]:
    """The worker's records that name ``job_id``, at ``level`` or above."""
    return [r for r in caplog.records if job_id in r.getMessage() and r.levelno >= level]


def test_a_requested_retry_is_one_info_line_with_its_delay(
    backend: Backend, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gq")
    runs: list[int] = []
    exc = gq.Retry(after=0.3, reason="the receiver said 429")
    job_id = run_one(backend, start, fails_first(exc, runs))
    assert runs == [0, 1]
    (line,) = about(caplog, job_id, logging.INFO)
    assert line.levelno == logging.INFO and line.name == "gq.processor"
    assert "retrying in 0.3 s: the receiver said 429" in line.getMessage()
    # No traceback, not even at DEBUG: a retry asked for is the plan, not a failure.
    assert all(r.exc_info is None for r in about(caplog, job_id, logging.DEBUG))


def test_a_retried_error_is_one_warning_line_with_the_error_its_traceback_at_debug(
    backend: Backend, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gq")
    runs: list[int] = []
    job_id = run_one(backend, start, fails_first(ConnectionError("reset by peer 7"), runs))
    assert runs == [0, 1]
    (line,) = about(caplog, job_id, logging.INFO)
    assert line.levelno == logging.WARNING
    assert "failed (attempt 0), retrying in" in line.getMessage()
    assert "ConnectionError: reset by peer 7" in line.getMessage()
    assert line.exc_info is None
    traced = [r for r in about(caplog, job_id, logging.DEBUG) if r.exc_info]
    assert [r.levelno for r in traced] == [logging.DEBUG]
    assert isinstance(traced[0].exc_info[1], ConnectionError)  # type: ignore[index]


def always_fails(job: gq.Job) -> None:
    raise ValueError(f"broken for good, run {job.attempt}")


def test_one_line_per_retry_and_the_traceback_once_when_the_job_goes_to_dead(
    backend: Backend, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gq")
    job_id = run_one(backend, start, always_fails, job_max_attempts=2, job_max_backoff=0.05)
    lines = about(caplog, job_id, logging.INFO)
    assert [r.levelno for r in lines] == [logging.WARNING, logging.WARNING, logging.ERROR]
    assert "broken for good, run 0" in lines[0].getMessage()
    assert "broken for good, run 1" in lines[1].getMessage()
    assert "no attempts left, killed: ValueError: broken for good, run 2" in lines[2].getMessage()
    assert [r.exc_info is not None for r in lines] == [False, False, True]
    assert "always_fails" in caplog.text and caplog.text.count("Traceback") == 1


# -- the worker's real output ----------------------------------------------------------------


def stub() -> None:
    """Stands for a task of tests/retry_log_app.py on the enqueuing side."""


@pytest.fixture
def queue(redis_server: RedisServer) -> Any:
    name = f"test_retry_logs_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def test_gq_worker_writes_one_line_per_retry_and_a_traceback_only_for_dead(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    """gq-worker at its defaults (INFO, text) running tasks: what an operator reads."""
    env = env_for(redis_server.url, queue, GQ_TEST_TASK_QUEUE=queue)
    worker = Worker(tmp_path, "tests.retry_log_app:app", "--stats-interval", "0", env=env)
    try:
        app = gq.App(url=redis_server.url, queue=queue)
        for name in ("asks", "flaky", "broken"):  # tests/retry_log_app.py's tasks, by name
            app.task(name=name)(stub).enqueue()
        client = redis_server.client()
        wait_until(lambda: client.llen(f"{queue}:ran") == 2 and client.zcard(f"{queue}:dead"),
                   20, message="asks and flaky done, broken dead")  # fmt: skip
    finally:
        worker.stop()
    lines = log_lines(worker.output)
    asked = [line for line in lines if "asked for a retry" in line]
    assert len(asked) == 1 and " INFO " in asked[0], lines
    assert "retrying in 0.2 s: the receiver said 429" in asked[0]
    warned = [line for line in lines if " WARNING " in line and "failed (attempt" in line]
    assert len(warned) == 2, lines  # flaky's retry and broken's first
    assert any("ConnectionError: reset by peer" in line for line in warned)
    assert sum(" ERROR " in line for line in lines) == 1
    assert worker.output.count("Traceback (most recent call last)") == 1, worker.output
    assert 'in broken\n    raise ValueError("broken for good")' in worker.output
