"""A kept outcome belongs to one life of its id (issue 31, defects 10 and 11): a new job
under a freed id, or a dead job queued again, starts with no outcome; and a task's own
result_ttl holds for jobs whose envelope does not repeat it."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from gq.store.admin import QueueAdmin
from gq.tasks import envelope
from tests.helpers import Backend, wait_until
from tests.task_support import make_app, push_raw, run_app

__all__ = ["run_app"]  # the fixture


def test_a_new_job_under_a_freed_id_has_no_outcome_before_it_runs(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def double(x: int) -> int:
        return 2 * x

    first = double.using(id="same").enqueue(1)
    consumer = run_app(app)
    assert first.get(timeout=10) == 2
    consumer.stop()
    second = double.using(id="same").enqueue(5)  # the id was freed by the ack
    assert second.status() == "ready"
    with pytest.raises(TimeoutError):
        second.get(timeout=0.2)  # not the previous job's 2
    run_app(app)
    assert second.get(timeout=10) == 10
    assert second.status() == "done"


def test_a_dead_job_retried_reads_as_queued_until_it_ends(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    calls: list[int] = []

    @app.task(result_ttl=60, retries=0)
    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first life fails")
        return "second life"

    r = flaky.enqueue()
    consumer = run_app(app)
    with pytest.raises(gq.TaskFailed, match="first life fails"):
        r.get(timeout=10)
    consumer.stop()
    assert r.status() == "failed"
    assert QueueAdmin(backend.client(), backend.queue).retry_dead([(r.id, None)]) == [True]
    assert r.status() == "ready"  # SPEC 16: "failed" means the job is in dead
    with pytest.raises(TimeoutError):
        r.get(timeout=0.2)
    run_app(app)
    assert r.get(timeout=10) == "second life"


def test_a_job_killed_in_a_later_life_reads_failed_not_done(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    lives: list[int] = []

    @app.task(result_ttl=60, retries=0)
    def once_good() -> str:
        lives.append(1)
        if len(lives) > 1:
            raise RuntimeError("second life fails")
        return "fine"

    first = once_good.using(id="again").enqueue()
    consumer = run_app(app)
    assert first.get(timeout=10) == "fine"
    consumer.stop()
    second = once_good.using(id="again").enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed, match="second life fails"):
        second.get(timeout=10)
    assert second.status() == "failed"


@pytest.mark.parametrize(
    "opts", [None, {"retries": 2}], ids=["no opts", "opts without result_ttl"]
)
def test_the_tasks_own_result_ttl_holds_for_an_envelope_that_omits_it(
    backend: Backend, run_app: Any, opts: dict[str, Any] | None
) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def add(a: int, b: int) -> int:
        return a + b

    job_id = push_raw(backend, envelope.encode(add.name, [2, 3], {}, opts))
    run_app(app)
    result = app.result(job_id)
    assert result.get(timeout=10) == 5
    assert result.status() == "done"


def test_the_tasks_own_result_ttl_holds_for_keyword_arguments(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def add(a: int, b: int) -> int:
        return a + b

    job_id = push_raw(backend, envelope.encode(add.name, [], {"a": 1, "b": 4}))
    run_app(app)
    assert app.result(job_id).get(timeout=10) == 5


def test_a_call_asking_for_no_result_keeps_none_of_a_keeping_task(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)

    @app.task(result_ttl=60)
    def one() -> int:
        return 1

    kept, unkept = one.enqueue(), one.using(result_ttl=0).enqueue()
    run_app(app)
    assert kept.get(timeout=10) == 1
    wait_until(lambda: backend.direct().hget(f"{backend.queue}:data", unkept.id) is None)
    assert unkept.status() == "missing"
