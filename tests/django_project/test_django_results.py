"""Django's ``get_result`` and ``TaskResult.refresh()`` on gq's results: jobs enqueued
through Django, run by real ``manage.py gq_worker`` processes, read back from Redis."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from tests.helpers import kept_pttl, wait_until

DAY_MS = 86400 * 1000


def ran(client: redis.Redis) -> list[str]:
    return [entry.decode() for entry in client.lrange("django:ran", 0, -1)]


def wait_for(condition: Any, worker: Any, what: str) -> None:
    """wait_until, with the worker's output when the condition never came."""
    try:
        wait_until(condition, timeout=30, message=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe worker said:\n{worker.output}") from None


def finished(backend: Any, *ids: str) -> bool:
    return all(backend.get_result(i).is_finished for i in ids)


def test_get_result_gives_a_real_workers_outcomes(client: redis.Redis, manage: Any) -> None:
    from django.tasks import TaskResultStatus, default_task_backend
    from shop import tasks

    backend = default_task_backend
    add = tasks.add.enqueue(2, 3)
    receipt = tasks.send_receipt.enqueue("ada", lines=["tea", "cake"])  # on "emails"
    flaky, later = tasks.flaky.enqueue("x"), tasks.later.enqueue(4)
    waiting = backend.get_result(add.id)
    assert (waiting.status, waiting.args, waiting.attempts, waiting.errors) == (
        TaskResultStatus.READY, [2, 3], 0, [])  # fmt: skip
    assert waiting.task is tasks.add and waiting.finished_at is None

    before = time.time()
    worker = manage("--poller-poll-duration", "0.5", "--scheduler-poll-interval", "0.1")
    wait_for(lambda: finished(backend, add.id, receipt.id, flaky.id, later.id), worker,
             "four outcomes")  # fmt: skip
    done = tasks.add.get_result(add.id)
    assert (done.status, done.return_value, done.args, done.kwargs, done.attempts) == (
        TaskResultStatus.SUCCESSFUL, 5, [2, 3], {}, 1)  # fmt: skip
    assert done.errors == [] and before - 1 < done.finished_at.timestamp() < time.time() + 1
    receipt_result = backend.get_result(receipt.id)  # found on the backend's second queue
    assert receipt_result.return_value == {"to": "ada", "lines": ["tea", "cake"]}
    assert receipt_result.kwargs == {"lines": ["tea", "cake"]}
    assert (backend.get_result(flaky.id).return_value, backend.get_result(flaky.id).attempts) == (
        "x", 2)  # fmt: skip
    assert backend.get_result(later.id).return_value == 4  # an async task's
    # Kept for RESULT_TTL's default, a day.
    assert DAY_MS - 60_000 < (kept_pttl(client, "default", add.id) or 0) <= DAY_MS


def test_a_failed_task_gives_failed_with_its_error(client: redis.Redis, manage: Any) -> None:
    from django.tasks import TaskResultStatus, default_task_backend
    from shop import tasks

    backend = default_task_backend
    broken, stock = tasks.broken.enqueue(), tasks.out_of_stock.enqueue("tea")
    later, huge = tasks.retries_later.enqueue(), tasks.huge.enqueue()
    worker = manage("--poller-poll-duration", "0.5", "--scheduler-poll-interval", "0.1")
    wait_for(lambda: finished(backend, broken.id, stock.id, huge.id)
             and backend.get_result(later.id).attempts == 1, worker,
             "two failures, a retry and an unkept value")  # fmt: skip

    failed = tasks.broken.get_result(broken.id)
    assert (failed.status, failed.attempts, failed.is_finished) == (TaskResultStatus.FAILED, 2,
                                                                    True)  # fmt: skip
    assert failed.finished_at is not None
    [error] = failed.errors
    # Django's form: the class, and a traceback that ends as Python's does.
    assert error.exception_class is ValueError
    assert error.traceback.endswith("ValueError: always\n")
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value
    # The task's own exception, named by its class path.
    [error] = backend.get_result(stock.id).errors
    assert error.exception_class is tasks.OutOfStock
    assert error.traceback.endswith("OutOfStock: no tea left\n")
    # Waiting for its retry: ready again, with the error of the attempt it made.
    retrying = backend.get_result(later.id)
    assert (retrying.status, retrying.attempts, retrying.finished_at) == (
        TaskResultStatus.READY, 1, None)  # fmt: skip
    import gq

    assert [e.exception_class for e in retrying.errors] == [gq.Retry]
    assert retrying.errors[0].traceback.endswith("Retry: supplier down\n")
    # It ran once, but its return value could not be kept: there is none to give.
    unkept = backend.get_result(huge.id)
    assert (unkept.status, unkept.attempts) == (TaskResultStatus.FAILED, 1)
    assert unkept.errors[0].exception_class is gq.TaskFailed
    assert unkept.errors[0].traceback.startswith("the return value could not be kept")
    assert ran(client).count("huge") == 1  # acknowledged: the work is not done again


def test_refresh_follows_a_job_until_it_finishes(client: redis.Redis, manage: Any) -> None:
    from django.tasks import TaskResultStatus
    from shop import tasks

    result = tasks.waits.enqueue("go:key")
    worker = manage("--poller-poll-duration", "0.5")

    def refreshed() -> TaskResultStatus:
        result.refresh()
        return result.status

    wait_for(lambda: refreshed() == TaskResultStatus.RUNNING, worker, "running")
    assert (result.attempts, result.is_finished) == (1, False)
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value
    client.rpush("go:key", "went")
    wait_for(lambda: refreshed() == TaskResultStatus.SUCCESSFUL, worker, "done")
    assert result.return_value == "went" and result.finished_at is not None
    again = asyncio.run(tasks.waits.aget_result(result.id))  # Django's async API: the same
    assert (again.status, again.return_value) == (TaskResultStatus.SUCCESSFUL, "went")


def test_what_gq_does_not_know_does_not_exist(client: redis.Redis, django_url: str) -> None:
    from django.tasks import default_task_backend
    from django.tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from shop import tasks

    import gq

    backend = default_task_backend
    with pytest.raises(TaskResultDoesNotExist, match="'nope'.*default, emails"):
        backend.get_result("nope")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("nope")
    broken = tasks.broken.enqueue()
    with pytest.raises(TaskResultMismatch, match="shop.tasks.broken"):
        tasks.add.get_result(broken.id)  # Django's own check, on the task gq names
    plain_app = gq.App(url=django_url)  # a gq task sharing the queue, of no Django task
    plain = plain_app.task(name="billing.charge")(lambda: None).enqueue()
    with pytest.raises(TaskResultDoesNotExist, match="gq task 'billing.charge', not a Django"):
        backend.get_result(plain.id)
    client.delete("default:data", "default:active")  # as a cancel or an expiry leaves it
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(broken.id)


def test_result_ttl_zero_keeps_none_and_says_so(client: redis.Redis, django_url: str) -> None:
    from django.tasks import task_backends
    from shop import tasks

    from gq import job as jobs
    from gq.tasks import envelope

    def opts(result_id: str) -> dict[str, Any]:
        message = client.hget("default:data", result_id)
        assert message is not None
        return envelope.decode(jobs.decode(message).data).opts

    assert task_backends["default"].supports_get_result is True
    assert opts(tasks.add.enqueue(1, 2).id)["result_ttl"] == 86400
    quiet = task_backends["nokeep"]
    assert quiet.supports_get_result is False
    result = tasks.quiet.enqueue()
    assert opts(result.id).get("result_ttl", 0) == 0  # (0 is written: no fallback to a keep)
    with pytest.raises(NotImplementedError, match="RESULT_TTL is 0"):
        result.refresh()
    from django.core.exceptions import ImproperlyConfigured

    from gq.contrib.django.backend import app_for

    with pytest.raises(ImproperlyConfigured, match="result_ttl"):
        app_for("negative", {"RESULT_TTL": -1}, "default")
