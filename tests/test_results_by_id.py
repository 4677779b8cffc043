"""``app.result(job_id)`` from an id alone (a status endpoint, SPEC section 16): the job is
found on whichever of the app's queues it is, waiting, done or dead (issue 31, defect 12)."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from tests.helpers import Backend
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture


def test_an_id_alone_finds_a_job_of_a_queue_other_than_the_default(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend, result_ttl=60)
    other = f"{backend.queue}-emails"

    @app.task(queue=other)
    def send(to: str) -> str:
        return f"sent to {to}"

    r = send.enqueue("ada")
    found = app.result(r.id)
    assert (found.queue, found.status()) == (other, "ready")
    run_app(app)
    assert app.result(r.id).get(timeout=10) == "sent to ada"
    assert app.result(r.id).queue == other  # found by its kept outcome, the message gone


def test_an_id_alone_finds_a_dead_job_and_a_queue_given_is_a_shortcut(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend, result_ttl=60, retries=0)
    other = f"{backend.queue}-reports"

    @app.task(queue=other)
    def report() -> None:
        raise ValueError("no data")

    r = report.enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed, match="no data"):
        app.result(r.id).get(timeout=10)
    assert app.result(r.id, queue=other).status() == "failed"


def test_an_id_on_a_queue_only_enqueued_to_is_found(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def noop() -> None:
        return None

    r = noop.using(queue=f"{backend.queue}-elsewhere").enqueue()
    assert app.result(r.id).status() == "ready"


def test_an_unknown_id_still_says_gq_knows_nothing_of_it(backend: Backend) -> None:
    app = make_app(backend, result_ttl=60)

    @app.task(queue=f"{backend.queue}-emails")
    def send() -> None:
        return None

    result = app.result("no-such-id")
    assert (result.queue, result.status()) == (backend.queue, "missing")
    with pytest.raises(gq.ResultUnavailable, match="knows nothing of it"):
        result.get(timeout=1)
