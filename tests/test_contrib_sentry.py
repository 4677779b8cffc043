"""gq.contrib.sentry with the real sentry-sdk and a transport that keeps what it is
given (no network): the failed attempts of a worker's jobs are reported with the job's
id, task, queue, attempt and scrubbed arguments; what the user asked for is not."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

sentry_sdk = pytest.importorskip("sentry_sdk")

from sentry_sdk.envelope import Envelope  # noqa: E402
from sentry_sdk.integrations.logging import LoggingIntegration  # noqa: E402
from sentry_sdk.transport import Transport  # noqa: E402

import gq  # noqa: E402
import gq.contrib.sentry  # noqa: E402
from tests.helpers import Backend, stays_true, wait_until  # noqa: E402
from tests.task_support import dead, make_app, run_app  # noqa: E402

__all__ = ["run_app"]  # the fixture


class Kept(Transport):
    """Keeps every envelope the client sends."""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def events(self) -> list[dict[str, Any]]:
        return [e.get_event() for e in self.envelopes if e.get_event() is not None]

    def transactions(self) -> list[dict[str, Any]]:
        found = [e.get_transaction_event() for e in self.envelopes]
        return [t for t in found if t is not None]


@pytest.fixture
def sentry() -> Iterator[Any]:
    """``sentry(**options)`` starts a client on a Kept transport; closed at teardown."""

    def start(**options: Any) -> Kept:
        transport = Kept()
        options.setdefault("default_integrations", False)
        sentry_sdk.init(dsn="https://key@sentry.invalid/1", transport=transport, **options)
        return transport

    yield start
    sentry_sdk.get_client().close()
    sentry_sdk.get_global_scope().set_client(None)


def test_a_failed_attempt_is_reported_with_the_job_and_filtered_arguments(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    kept = sentry()
    app = gq.contrib.sentry.instrument(make_app(backend))

    @app.task(name="charge", retries=1)
    def charge(card: str, amount: int) -> None:
        raise ValueError("declined")

    result = charge.enqueue("4242", amount=5)
    run_app(app)
    wait_until(lambda: result.id in dead(backend))
    wait_until(lambda: len(kept.events()) == 2)  # each failed attempt, once
    for attempt, event in enumerate(sorted(kept.events(), key=lambda e: e["tags"]["gq.attempt"])):
        assert event["exception"]["values"][-1]["type"] == "ValueError"
        assert event["exception"]["values"][-1]["mechanism"] == {"type": "gq", "handled": False}
        assert event["tags"] == {"gq.job_id": result.id, "gq.task": "charge",
                                 "gq.queue": backend.queue, "gq.attempt": str(attempt)}  # fmt: skip
        assert event["extra"]["gq-job"] == {
            "id": result.id, "task": "charge", "queue": backend.queue, "attempt": attempt,
            "args": "[Filtered]", "kwargs": "[Filtered]",  # send_default_pii is off
        }  # fmt: skip
        assert event["transaction"] == "charge"


def test_with_send_default_pii_the_arguments_go_through_the_sdks_scrubber(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    kept = sentry(send_default_pii=True)
    app = gq.contrib.sentry.instrument(make_app(backend))

    @app.task(name="login", retries=0)
    def login(user: str, password: str, options: dict[str, Any]) -> None:
        raise RuntimeError("no")

    login.enqueue("ada", password="hunter2", options={"api_key": "k-1", "lang": "en"})
    run_app(app)
    wait_until(lambda: len(kept.events()) == 1)
    job = kept.events()[0]["extra"]["gq-job"]
    assert job["args"] == ["ada"]
    assert job["kwargs"]["password"] == "[Filtered]"
    frames = kept.events()[0]["exception"]["values"][-1]["stacktrace"]["frames"]
    local_variables = repr([frame.get("vars") for frame in frames])
    assert "'password': '[Filtered]'" in local_variables  # the task's own frame, scrubbed
    assert "hunter2" not in local_variables  # nor in gq's frames (the envelope's reprs)
    assert job["kwargs"]["options"]["lang"] == "en"


def test_retry_kill_and_ignored_errors_are_not_reported(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    kept = sentry()
    app = gq.contrib.sentry.instrument(make_app(backend), ignore=(KeyError,))
    ran: list[str] = []

    @app.task(name="later", retries=1)
    def later() -> None:
        job = gq.current_job()
        assert job is not None
        ran.append(f"later {job.attempt}")
        if job.attempt == 0:
            raise gq.Retry(after=0)

    @app.task(name="gone")
    def gone() -> None:
        ran.append("gone")
        raise gq.Kill("endpoint gone")

    @app.task(name="expected", retries=0)
    def expected() -> None:
        ran.append("expected")
        raise KeyError("ignored")

    later.enqueue()
    gone.enqueue()
    expected.enqueue()
    run_app(app)
    wait_until(lambda: sorted(ran) == ["expected", "gone", "later 0", "later 1"])
    wait_until(lambda: len(dead(backend)) == 2)
    assert kept.events() == []


def test_the_trace_of_the_enqueue_continues_in_the_worker(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    kept = sentry(traces_sample_rate=1.0)
    app = gq.contrib.sentry.instrument(make_app(backend))
    ran: list[Any] = []

    @app.task(name="traced")
    def traced() -> None:
        ran.append(gq.current_job())

    with sentry_sdk.start_transaction(op="http.server", name="POST /pay") as web:
        traced.enqueue()
    run_app(app)
    wait_until(lambda: len(kept.transactions()) == 2)
    assert "sentry-trace" in ran[0].headers
    by_op = {t["contexts"]["trace"]["op"]: t for t in kept.transactions()}
    job_trace = by_op["queue.process"]["contexts"]["trace"]
    assert job_trace["trace_id"] == web.trace_id
    assert job_trace["parent_span_id"] == web.span_id
    assert job_trace["data"]["messaging.system"] == "gq"
    assert by_op["queue.process"]["transaction"] == "traced"


def test_the_workers_failure_log_line_is_not_a_second_event(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    # No Dedupe integration (default_integrations=False): the repeat is gq's to drop.
    kept = sentry(integrations=[LoggingIntegration(event_level=logging.ERROR)])
    app = gq.contrib.sentry.instrument(make_app(backend))

    @app.task(name="once", retries=0)
    def once() -> None:
        logging.getLogger("tests.sentry").error("the task's own error line")
        raise ValueError("bad")

    @app.task(name="async_once", retries=0)
    async def async_once() -> None:  # run on the asyncio loop, logged by the greenlet
        raise KeyError("bad")

    results = [once.enqueue(), async_once.enqueue()]
    run_app(app)
    wait_until(lambda: all(r.id in dead(backend) for r in results))
    wait_until(lambda: len(kept.events()) == 3)
    stays_true(lambda: len(kept.events()) == 3, 0.3)
    kinds = sorted(e["exception"]["values"][-1]["type"] if "exception" in e
                   else e["logentry"]["message"] for e in kept.events())  # fmt: skip
    assert kinds == ["KeyError", "ValueError", "the task's own error line"]
    assert all(e["exception"]["values"][-1]["mechanism"]["type"] == "gq"
               for e in kept.events() if "exception" in e)  # fmt: skip


def test_what_gq_only_logs_still_reaches_sentry_through_the_logs(
    backend: Backend, run_app: Any, sentry: Any
) -> None:
    kept = sentry(integrations=[LoggingIntegration(event_level=logging.ERROR)])
    app = gq.contrib.sentry.instrument(make_app(backend))

    @app.raw(queue=backend.queue)
    def legacy(job: gq.Job) -> None:  # a byte handler: no task, no hooks
        raise ValueError("legacy failure")

    gq.Producer(backend.queue, client=backend.client()).perform(b"payload")
    run_app(app, job_max_attempts=0)
    wait_until(lambda: len(kept.events()) == 1)
    event = kept.events()[0]
    assert event["logger"] == "gq.processor"
    assert event["exception"]["values"][-1]["value"] == "legacy failure"
