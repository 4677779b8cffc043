"""A job's times and a failure's traceback (issue 31, section 3): when it was enqueued,
first started, last started and finished, on Result, job_view and ``gq job``; a bounded
traceback with a failure, carried by TaskFailed."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

import gq
from gq.cli.job_cmd import render
from gq.store.tasks import TaskQueue
from gq.tasks.ids import id_time, new_id
from gq.tasks.jobview import job_view
from gq.tasks.outcome import TRACEBACK_MAX
from tests.helpers import Backend
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture

TIMES = ("enqueued_at", "started_at", "last_started_at", "finished_at")
SLACK = 0.05  # (the client's, the worker's and the server's clocks: one host's)


def test_new_ids_are_uuid7_and_tell_their_time() -> None:
    before = time.time()
    job_id = new_id()
    parsed = uuid.UUID(job_id)
    assert (parsed.version, str(parsed)) == (7, job_id)
    made = id_time(job_id)
    assert made is not None and before - 0.001 <= made <= time.time()
    assert id_time(f"{job_id}.3") == made  # a workflow step's id, made from it
    assert id_time(str(uuid.uuid4())) is None and id_time("my-own-id") is None


def test_a_done_job_tells_its_times(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def noop() -> int:
        return 1

    before = time.time()
    r = noop.enqueue()
    run_app(app)
    assert r.get(timeout=10) == 1
    times = r.times()
    assert None not in (times.enqueued_at, times.started_at, times.finished_at)
    assert before - 0.001 <= times.enqueued_at <= times.started_at + SLACK  # type: ignore[operator]
    assert times.started_at == times.last_started_at
    assert times.started_at <= times.finished_at + SLACK  # type: ignore[operator]
    view = job_view(TaskQueue(backend.client(), backend.queue), r.id)
    assert tuple(view[k] for k in TIMES) == (times.enqueued_at, times.started_at,
                                             times.last_started_at, times.finished_at)
    assert view["traceback"] is None
    text = render(view)
    assert "enqueued_at:" in text and "last_started_at:" in text


def test_a_retried_job_knows_its_last_start_not_its_first(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    tries: list[float] = []

    @app.task(result_ttl=60, retries=1, backoff=0.01)
    def second_time() -> str:
        tries.append(time.time())
        if len(tries) == 1:
            raise RuntimeError("not yet")
        return "ok"

    r = second_time.enqueue()
    run_app(app)
    assert r.get(timeout=10) == "ok"
    times = r.times()
    assert times.started_at is None  # (the first run's start is not carried by a retry)
    assert times.last_started_at is not None
    assert tries[0] <= times.last_started_at <= tries[1] + SLACK


def _deep(n: int) -> None:
    if n == 0:
        raise RuntimeError("boom at the bottom")
    _deep(n - 1)


def _chatty(n: int) -> None:
    """A failure whose traceback is longer than any kept: a long chain of causes."""
    try:
        _deep(1) if n == 0 else _chatty(n - 1)
    except RuntimeError as exc:
        raise RuntimeError(f"boom at the bottom (cause {n})") from exc


def test_a_failure_keeps_a_bounded_traceback(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60, retries=0)
    def fails(depth: int) -> None:
        _deep(depth) if depth < 100 else _chatty(depth - 100)

    shallow, deep = fails.enqueue(1), fails.enqueue(150)
    run_app(app)
    with pytest.raises(gq.TaskFailed) as caught:
        shallow.get(timeout=10)
    trace = caught.value.traceback
    assert trace is not None and "_deep" in trace and "Traceback" in trace
    assert trace.rstrip().endswith("RuntimeError: boom at the bottom")
    with pytest.raises(gq.TaskFailed) as caught:
        deep.get(timeout=10)
    long = caught.value.traceback
    assert long is not None and len(long) <= TRACEBACK_MAX + 4
    assert long.startswith("...") and long.rstrip().endswith("boom at the bottom (cause 50)")
    view = job_view(TaskQueue(backend.client(), backend.queue), shallow.id)
    assert view["traceback"] == trace and view["last_started_at"] is not None
    json.dumps(view["traceback"])  # (text: the dict is JSON as it is)


def test_a_job_that_never_ran_has_no_start(backend: Backend, run_app: Any) -> None:
    from datetime import datetime, timezone

    app = make_app(backend)

    @app.task(result_ttl=60, expires=datetime(2000, 1, 1, tzinfo=timezone.utc))
    def late() -> None: ...

    r = late.enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed, match="expired"):
        r.get(timeout=10)
    times = r.times()
    assert times.enqueued_at is not None and times.finished_at is not None
    assert (times.started_at, times.last_started_at) == (None, None)


def test_the_enqueue_time_survives_a_rewrite_to_curlyqs_three_keys(backend: Backend) -> None:
    import msgpack

    app = make_app(backend)

    @app.task()
    def noop() -> None: ...

    r = noop.enqueue()
    client = backend.direct()
    stored = msgpack.unpackb(client.hget(f"{backend.queue}:data", r.id), raw=False)
    curlyq = {"ID": stored["ID"], "Attempt": 2, "Data": stored["Data"]}  # its retry's rewrite
    client.hset(f"{backend.queue}:data", r.id, msgpack.packb(curlyq, use_bin_type=True))
    view = job_view(TaskQueue(backend.client(), backend.queue), r.id)
    assert view["attempt"] == 2 and view["enqueued_at"] == id_time(r.id) is not None
    assert r.times().enqueued_at == view["enqueued_at"]
