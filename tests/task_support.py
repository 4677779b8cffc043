"""Helpers of the task tests: an app on a test backend, a consumer running it, and the
state of its queues."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gevent
import pytest

import gq
from gq import job as jobs
from gq.store.admin import QueueAdmin
from tests.helpers import Backend


def make_app(backend: Backend, **defaults: Any) -> gq.App:
    return gq.App(client=backend.client(), queue=backend.queue, **defaults)


class Running:
    """Consumers of apps started by a test, stopped (cleanly) at its teardown."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.running: list[tuple[gq.Consumer, gevent.Greenlet]] = []

    def __call__(self, app: gq.App, **options: Any) -> gq.Consumer:
        options.setdefault("poller_poll_duration", 1.0)
        options.setdefault("scheduler_poll_interval", 0.1)
        options.setdefault("job_max_backoff", 0.05)
        queues = app.queues
        consumer = gq.Consumer(
            queues if len(queues) > 1 else queues[0], client=self.backend.client(), **options
        )
        self.running.append((consumer, gevent.spawn(consumer.run, app)))
        return consumer

    def stop(self) -> None:
        for consumer, greenlet in self.running:
            consumer.stop()
            greenlet.join(timeout=10)
            assert greenlet.dead
            assert greenlet.exception is None, greenlet.exception


@pytest.fixture
def run_app(backend: Backend) -> Iterator[Running]:
    running = Running(backend)
    yield running
    running.stop()


def dead(backend: Backend, queue: str | None = None) -> dict[str, str | None]:
    """Dead job id -> its stored error."""
    admin = QueueAdmin(backend.direct(), queue or backend.queue)
    return {
        job_id: jobs.decode_error(message) if message else None
        for job_id, _, message in admin.dead_jobs(1000)
    }


def scheduled(backend: Backend, queue: str | None = None) -> dict[str, float]:
    """Scheduled job id -> when it is due (unix seconds)."""
    admin = QueueAdmin(backend.direct(), queue or backend.queue)
    return {job_id: at for job_id, at, _ in admin.scheduled_jobs(1000)}


def stored(backend: Backend, job_id: str, queue: str | None = None) -> gq.Job | None:
    message = backend.direct().hget(f"{queue or backend.queue}:data", job_id)
    return None if message is None else jobs.decode(message)


def push_raw(backend: Backend, data: bytes, job_id: str = "raw-1") -> str:
    """Enqueue a job whose Data is ``data`` as it is (a foreign producer's)."""
    gq.Producer(backend.queue, client=backend.client()).perform(gq.Job(job_id, data))
    return job_id
