"""Tasks, the worker's side (SPEC section 14): a consumer running a gq.App dispatches by
task name, enforces the options of the message, and sends what cannot run to dead with
the reason (or retries it, for an unknown task)."""

from __future__ import annotations

import time
from typing import Any

import gevent
import msgpack
import pytest

import gq
from gq.tasks import envelope
from tests.helpers import Backend, stays_true, wait_until
from tests.task_support import dead, make_app, push_raw, run_app, scheduled, stored

__all__ = ["run_app"]  # the fixture


def test_tasks_run_with_their_arguments_and_current_job(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    seen: list[Any] = []

    @app.task
    def deliver(url: str, payload: dict[str, Any], tenant: str) -> int:
        seen.append((url, payload, tenant, gq.current_job()))
        return 200

    other_queue = f"{backend.queue}-b"

    @app.task(queue=other_queue)
    def other(items: tuple[int, ...]) -> None:
        seen.append(items)

    assert app.queues == [backend.queue, other_queue]
    result = deliver.using(headers={"trace": "t1"}).enqueue("https://a", {"x": [1]}, tenant="acme")
    other.enqueue((1, 2))
    run_app(app)
    wait_until(lambda: len(seen) == 2)
    first = next(s for s in seen if isinstance(s, tuple) and len(s) == 4)
    url, payload, tenant, job = first
    assert (url, payload, tenant) == ("https://a", {"x": [1]}, "acme")
    assert job == gq.CurrentJob(result.id, 0, backend.queue, deliver.name, {"trace": "t1"})
    assert [1, 2] in seen  # a tuple arrives as a list
    assert gq.current_job() is None  # outside a task
    wait_until(lambda: stored(backend, result.id) is None)  # acknowledged


def test_retry_after_reschedules_with_an_attempt_charged(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task(retries=5)
    def limited() -> None:
        raise gq.Retry(after=300)

    result = limited.enqueue()
    before = time.time()
    run_app(app)
    wait_until(lambda: result.id in scheduled(backend))
    assert before + 290 < scheduled(backend)[result.id] < time.time() + 310
    job = stored(backend, result.id)
    assert job is not None and job.attempt == 1


def test_retry_with_no_attempts_left_goes_to_dead(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=1)
    def limited() -> None:
        runs.append(gq.current_job().attempt)  # type: ignore[union-attr]
        raise gq.Retry(after=0)

    result = limited.enqueue()
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    assert runs == [0, 1]
    assert "Retry" in (dead(backend)[result.id] or "")


def test_kill_sends_to_dead_at_once_with_the_reason(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=8)
    def gone() -> None:
        runs.append(1)
        raise gq.Kill("endpoint gone")

    result = gone.enqueue()
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    assert dead(backend)[result.id] == "endpoint gone"
    assert runs == [1]


def test_per_task_retries_and_timeout_travel_in_the_message(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=2, timeout=0.2)
    def slow() -> None:
        runs.append(1)
        gevent.sleep(5)

    result = slow.enqueue()
    run_app(app, job_max_attempts=20, job_timeout=None)  # the worker's flags lose
    wait_until(lambda: result.id in dead(backend), timeout=15)
    assert len(runs) == 3
    assert "JobTimeout" in (dead(backend)[result.id] or "")


def test_app_defaults_then_worker_flags(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)  # no retries anywhere: the worker's flag decides
    runs: list[int] = []

    @app.task
    def fails() -> None:
        runs.append(1)
        raise ValueError("no")

    result = fails.enqueue()
    run_app(app, job_max_attempts=1)
    wait_until(lambda: result.id in dead(backend))
    assert len(runs) == 2 and dead(backend)[result.id] == "ValueError: no"


def test_unknown_task_is_retried_then_dead(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)

    @app.task
    def known() -> None: ...

    job_id = push_raw(backend, envelope.encode("newer.task", [], {}))
    run_app(app, job_max_attempts=2)
    wait_until(lambda: job_id in dead(backend))
    assert "unknown task newer.task" in (dead(backend)[job_id] or "")
    assert stored(backend, job_id).attempt == 3  # type: ignore[union-attr]  # 1 + 2 retries


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (envelope.MAGIC + b"\xc1garbage", "cannot decode the task envelope"),
        (envelope.MAGIC + msgpack.packb({"task": "t"}), "cannot decode the task envelope"),
        (b"plain bytes", "not a task envelope"),
    ],
)
def test_undecodable_envelopes_go_to_dead_at_once(
    backend: Backend, run_app: Any, data: bytes, reason: str
) -> None:
    app = make_app(backend)

    @app.task
    def known() -> None: ...

    job_id = push_raw(backend, data)
    run_app(app, job_max_attempts=5)
    wait_until(lambda: job_id in dead(backend))
    assert reason in (dead(backend)[job_id] or "")
    assert stored(backend, job_id).attempt == 1  # type: ignore[union-attr]  # one run, no retry


def test_arguments_that_do_not_bind_go_to_dead_at_once(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(name="deliver")
    def deliver(url: str) -> None:
        runs.append(1)

    job_id = push_raw(backend, envelope.encode("deliver", [1, 2], {"x": 3}))
    run_app(app, job_max_attempts=5)
    wait_until(lambda: job_id in dead(backend))
    assert "the arguments do not bind" in (dead(backend)[job_id] or "")
    assert runs == []


def test_expired_jobs_do_not_run(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(name="ping")
    def ping() -> None:
        runs.append(1)

    job_id = push_raw(backend, envelope.encode("ping", [], {}, {"expires": time.time() - 1}))
    fresh = ping.using(expires=600).enqueue()
    run_app(app)
    wait_until(lambda: job_id in dead(backend) and stored(backend, fresh.id) is None)
    assert dead(backend)[job_id] == "expired"
    assert runs == [1]


@pytest.mark.parametrize(
    "raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit(), gevent.GreenletExit()]
)
def test_base_exceptions_are_failures_and_the_job_is_kept(
    backend: Backend, run_app: Any, raised: BaseException
) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=1)
    def rude() -> None:
        runs.append(1)
        raise raised

    @app.task
    def after() -> None:
        runs.append(2)

    result = rude.enqueue()
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    assert type(raised).__name__ in (dead(backend)[result.id] or "")
    assert runs == [1, 1]
    after.enqueue()  # the worker still runs
    wait_until(lambda: runs == [1, 1, 2])


def test_a_return_value_without_a_form_is_logged_not_rerun(
    backend: Backend, run_app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(retries=3)
    def odd() -> object:
        runs.append(1)
        return object()

    result = odd.enqueue()
    run_app(app)
    wait_until(lambda: stored(backend, result.id) is None)  # acknowledged
    assert runs == [1]
    assert any("without a MessagePack form" in r.getMessage() for r in caplog.records)
    stays_true(lambda: runs == [1], 0.3)


def test_raw_handler_serves_its_queue(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    seen: list[bytes] = []

    @app.raw(queue=backend.queue)
    def legacy(job: gq.Job) -> None:
        seen.append(job.data)

    @app.task
    def task() -> None:
        seen.append(b"task")

    push_raw(backend, b"legacy bytes")
    task.enqueue()
    assert app.queues == [backend.queue]
    run_app(app)
    wait_until(lambda: sorted(seen) == [b"legacy bytes", b"task"])
    with pytest.raises(gq.ConfigurationError, match="raw handler already"):
        app.raw(queue=backend.queue)(legacy)


def test_unique_lock_frees_when_the_job_is_done(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[int] = []

    @app.task(unique_for=600)
    def once(n: int) -> None:
        runs.append(n)

    first = once.enqueue(1)
    assert once.enqueue(1) == first
    run_app(app)
    wait_until(lambda: runs == [1] and stored(backend, first.id) is None)
    second = once.enqueue(1)
    assert second != first
    wait_until(lambda: runs == [1, 1])


def test_periodic_entries_of_the_app_run(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    runs: list[str] = []

    @app.task
    def report(kind: str) -> None:
        runs.append(kind)

    app.periodic("every-second", report.s("daily"), every=1)
    run_app(app, periodic=app.schedules)
    wait_until(lambda: "daily" in runs, timeout=5)


def test_a_periodic_entry_goes_on_its_task_s_queue_not_the_worker_s_first(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    runs: list[str] = []
    other_queue = f"{backend.queue}-b"

    @app.task
    def first() -> None: ...

    @app.task(queue=other_queue)
    def report(kind: str) -> None:
        job = gq.current_job()
        assert job is not None
        runs.append(job.queue)

    app.periodic("every-second", report.s("daily"), every=1)
    assert app.queues == [backend.queue, other_queue]  # the worker's first is not report's
    run_app(app, periodic=app.schedules)
    wait_until(lambda: runs, timeout=5)
    assert set(runs) == {other_queue}
    # The entry's state (its cursor) is kept with the queue its jobs go on.
    assert backend.direct().keys(f"{other_queue}:*periodic*")
    assert not backend.direct().keys(f"{backend.queue}:*periodic*")


def test_a_periodic_entry_of_a_queue_the_worker_does_not_serve_is_still_enqueued_there(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    other_queue = f"{backend.queue}-b"

    @app.task(queue=other_queue)
    def report(kind: str) -> None: ...

    app.periodic("every-second", report.s("daily"), every=1)
    consumer = gq.Consumer(backend.queue, client=backend.client(), periodic=app.schedules,
                           scheduler_poll_interval=0.1)  # fmt: skip
    run_app.running.append((consumer, gevent.spawn(consumer.run, app)))
    ids = lambda: backend.direct().hkeys(f"{other_queue}:data")  # noqa: E731
    wait_until(lambda: any(i.startswith(b"periodic:every-second:") for i in ids()), timeout=5)
    assert not backend.direct().hkeys(f"{backend.queue}:data")
