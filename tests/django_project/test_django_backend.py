"""GQBackend against what Django's own tests found (issue 31): a backend per settings,
``QUEUES: []``, job times and tracebacks as Django's, and gq's options on ``@task``."""

from __future__ import annotations

from typing import Any

import pytest
import redis


def url_options() -> dict[str, Any]:
    from django.conf import settings

    return {"url": settings.TASKS["default"]["OPTIONS"]["url"]}


def test_a_backend_made_under_new_settings_has_their_app(client: redis.Redis) -> None:
    from django.tasks import task_backends
    from django.test import override_settings

    assert task_backends["default"].supports_get_result
    keeps_none = {"BACKEND": "gq.contrib.django.GQBackend",
                  "OPTIONS": {**url_options(), "RESULT_TTL": 0}}  # fmt: skip
    with override_settings(TASKS={"default": keeps_none}):
        backend = task_backends["default"]
        assert not backend.supports_get_result
        assert backend.app.defaults.result_ttl == 0
    assert task_backends["default"].supports_get_result  # and back


def test_queues_empty_finds_a_job_of_any_queue(client: redis.Redis) -> None:
    from django.tasks import TaskResultStatus, task_backends
    from django.test import override_settings
    from shop import tasks

    any_queue = {"BACKEND": "gq.contrib.django.GQBackend", "QUEUES": [],
                 "OPTIONS": url_options()}  # fmt: skip
    with override_settings(TASKS={"default": any_queue}):
        result = tasks.add.using(queue_name="elsewhere").enqueue(1, 2)
        assert client.hexists("elsewhere:data", result.id)
        found = task_backends["default"].get_result(result.id)
        assert (found.id, found.status, found.args) == (result.id, TaskResultStatus.READY, [1, 2])


def test_a_jobs_times_and_traceback_become_djangos(client: redis.Redis) -> None:
    from datetime import datetime, timezone

    from gq.contrib.django.results import to_task_result

    trace = 'Traceback (most recent call last):\n  File "x.py"\nValueError: always\n'
    view = {"id": "j1", "status": "failed", "task": "shop.tasks.broken", "attempt": 0,
            "error": "ValueError: always", "traceback": trace, "finished": 1_800_000_003.0,
            "enqueued_at": 1_800_000_000.0, "started_at": 1_800_000_001.0,
            "last_started_at": 1_800_000_002.0, "finished_at": 1_800_000_003.5}  # fmt: skip
    result = to_task_result("default", view)

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)

    assert (result.enqueued_at, result.started_at, result.last_attempted_at,
            result.finished_at) == (at(1_800_000_000), at(1_800_000_001), at(1_800_000_002),
                                    at(1_800_000_003.5))  # fmt: skip
    [error] = result.errors
    assert (error.exception_class, error.traceback) == (ValueError, trace)
    # A view without the times (a job of an older gq): None, and gq's text as the traceback.
    older = to_task_result("default", {k: v for k, v in view.items() if not k.endswith("_at")
                                       and k != "traceback"})  # fmt: skip
    assert (older.enqueued_at, older.started_at) == (None, None)
    assert older.finished_at == at(1_800_000_003)
    assert older.errors[0].traceback == "ValueError: always\n"


def test_gq_task_options_on_djangos_task_decorator(client: redis.Redis) -> None:
    from django.tasks import task
    from django.tasks.exceptions import InvalidTask
    from shop import tasks

    from gq.contrib.django import GQTask

    assert isinstance(tasks.restock, GQTask)
    registered = tasks.restock.get_backend().app.tasks
    options = registered["shop.tasks.restock"].options
    assert (options.retries, options.timeout, options.backoff, options.unique_for,
            options.result_ttl) == (5, 30, 2, 600, 120)  # fmt: skip
    assert registered["shop.tasks.grouped"].options.group == "shop"
    assert tasks.restock.using(queue_name="emails").retries == 5  # kept by using()
    result = tasks.restock.enqueue("tea")
    assert tasks.restock.enqueue("tea").id == result.id  # unique_for: the same job
    with pytest.raises(InvalidTask, match="retries"):
        task(retries=-1)(tasks.plain)  # gq's check, as Django's own checks say


def test_a_valkey_url_in_options_is_read_as_the_redis_one(client: redis.Redis) -> None:
    from django.tasks import TaskResultStatus, task_backends
    from django.test import override_settings
    from shop import tasks

    valkey = "valkey://" + url_options()["url"].split("://", 1)[1]
    backend = {"BACKEND": "gq.contrib.django.GQBackend", "QUEUES": [],
               "OPTIONS": {"url": valkey}}  # fmt: skip
    with override_settings(TASKS={"default": backend}):
        result = tasks.add.using(queue_name="over-valkey").enqueue(2, 3)
        assert client.hexists("over-valkey:data", result.id)  # the same server and database
        found = task_backends["default"].get_result(result.id)
        assert (found.status, found.args) == (TaskResultStatus.READY, [2, 3])


def test_shards_in_options_write_a_queue_s_jobs_to_its_shards(client: redis.Redis) -> None:
    from django.tasks import TaskResultStatus, task_backends
    from django.test import override_settings
    from shop import tasks

    from gq.store.shards import layout

    sharded = {"BACKEND": "gq.contrib.django.GQBackend", "QUEUES": ["default", "emails"],
               "OPTIONS": {**url_options(), "SHARDS": {"emails": 3}}}  # fmt: skip
    with override_settings(TASKS={"default": sharded}):
        assert task_backends["default"].app.sharding.counts == {"emails": 3}
        results = [tasks.add.using(queue_name="emails").enqueue(i, 1) for i in range(30)]
        on = {shard: client.hlen(f"{shard}:data") for shard in layout("emails", 3).queues}
        assert sum(on.values()) == 30 and all(on.values()), on  # spread over the 3 shards
        assert not client.exists("emails:data")
        found = task_backends["default"].get_result(results[5].id)
        assert (found.status, found.args) == (TaskResultStatus.READY, [5, 1])
