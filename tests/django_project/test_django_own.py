"""Django's own tests of its task framework (``tests/tasks`` of the installed Django's
source distribution, which .ci/django downloads and extracts into $GQ_DJANGO_OWN_TESTS),
run against ``gq.contrib.django.GQBackend`` on a real Redis.

- ``TaskTestCase`` (the Task API, written against DummyBackend): its ``default`` backend
  is GQBackend; jobs are enqueued on Redis and not run (as Dummy's are not).
- ``ImmediateBackendTestCase`` (the contract of a backend that runs tasks): after each
  enqueue, gq.testing's drain runs every job through gq's real scripts (fetch, finish,
  kill) on the same Redis, in this thread; then the result is ``refresh()``-ed from what
  gq kept. The assertions that follow are Django's own.

``SKIPPED`` lists the tests that cannot apply to a backend that is neither Dummy nor
Immediate, each with its reason; every other test must pass.
"""

from __future__ import annotations

import os
import sys
import unittest
from typing import Any
from unittest import mock

import django
import redis

from tests.django_project.conftest import DB, OWN_TESTS
from tests.helpers import RedisServer

assert OWN_TESTS  # (conftest collects this module only then)
sys.path.insert(0, OWN_TESTS)
_server = RedisServer.from_url(os.environ.get("GQ_TEST_REDIS_URL", "redis://127.0.0.1:6379"))
URL = f"redis://{_server.host}:{_server.port}/{DB}"
os.environ.setdefault("GQ_DJANGO_URL", URL)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django.setup()

from django.test import override_settings  # noqa: E402
from tasks.test_immediate_backend import ImmediateBackendTestCase  # noqa: E402
from tasks.test_tasks import TaskTestCase  # noqa: E402

import gq.testing  # noqa: E402
from gq.contrib.django.backend import GQBackend  # noqa: E402

BACKEND = "gq.contrib.django.GQBackend"
OPTIONS = {"url": URL, "retries": 0}  # Django's contract: one attempt, failed is FAILED

DUMMY = "asserts DummyBackend itself (isinstance, or its in-memory .results list)"
PRIORITY = "uses a priority other than 0: gq orders by queue, not per job (supports_priority False)"
IMMEDIATE = "asserts ImmediateBackend itself (isinstance)"
KEEPS_NONE = "ImmediateBackend keeps no results; GQBackend does (RESULT_TTL), so get_result works"
DEFERS = "ImmediateBackend cannot defer; GQBackend can (supports_defer, gq's scheduled jobs)"
SKIPPED: dict[str, dict[str, str]] = {
    "TaskTestCase": {
        "test_using_correct_backend": DUMMY,
        "test_get_backend": DUMMY,
        "test_enqueue_task": DUMMY,
        "test_enqueue_task_async": DUMMY,
        "test_using_priority": PRIORITY,
        "test_chained_using": PRIORITY,
        "test_invalid_priority": PRIORITY,
    },
    "ImmediateBackendTestCase": {
        "test_using_correct_backend": IMMEDIATE,
        "test_cannot_get_result": KEEPS_NONE,
        "test_cannot_refresh_result": KEEPS_NONE,
        "test_cannot_pass_run_after": DEFERS,
    },
}


def flush() -> None:
    client = redis.Redis.from_url(URL)
    try:
        client.flushdb()
    finally:
        client.close()


class RedisWorker(gq.testing.Worker):
    """gq.testing's in-process worker on the Redis the backend writes to, not on an
    embedded server: the jobs run through gq's real scripts on a real Redis."""

    def __init__(self, app: gq.App) -> None:
        super().__init__(app)
        self.client = redis.Redis.from_url(URL)


def enqueue_and_run(backend: GQBackend, task: Any, args: Any, kwargs: Any) -> Any:
    """GQBackend.enqueue, then every job run by the worker, then the result refreshed."""
    result = ORIGINAL_ENQUEUE(backend, task, args, kwargs)
    RedisWorker(backend.app).drain()
    result.refresh()
    return result


ORIGINAL_ENQUEUE = GQBackend.enqueue


def skipping(cls: type, reasons: dict[str, str]) -> type:
    """``cls`` with the tests of ``reasons`` skipped, each saying why."""
    for name, reason in reasons.items():
        assert hasattr(cls, name), f"{cls.__name__}.{name} is no test of this Django"
        setattr(cls, name, unittest.skip(reason)(getattr(cls, name)))
    return cls


@override_settings(
    TASKS={
        "default": {"BACKEND": BACKEND, "QUEUES": ["default", "queue_1"], "OPTIONS": OPTIONS},
        "immediate": {
            "BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
            "QUEUES": [],
        },  # fmt: skip
        "missing": {"BACKEND": "does.not.exist"},
    },
    USE_TZ=True,
)
class GQTaskTestCase(TaskTestCase):  # type: ignore[misc]
    def setUp(self) -> None:
        flush()  # instead of DummyBackend's clear()


@override_settings(TASKS={"default": {"BACKEND": BACKEND, "QUEUES": [], "OPTIONS": OPTIONS}})
class GQImmediateBackendTestCase(ImmediateBackendTestCase):  # type: ignore[misc]
    def setUp(self) -> None:
        super().setUp()
        flush()
        patch = mock.patch.object(GQBackend, "enqueue", enqueue_and_run)
        patch.start()
        self.addCleanup(patch.stop)


skipping(GQTaskTestCase, SKIPPED["TaskTestCase"])
skipping(GQImmediateBackendTestCase, SKIPPED["ImmediateBackendTestCase"])
del TaskTestCase, ImmediateBackendTestCase  # (not collected again as Django wrote them)
