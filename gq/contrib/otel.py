"""OpenTelemetry for gq tasks (``pip install 'gq[otel]'``, on ``opentelemetry-api``).

    import gq.contrib.otel
    gq.contrib.otel.instrument(app)        # the global tracer provider, or tracer_provider=

Every job enqueued is a ``publish {queue}`` span (kind PRODUCER) and every run of one a
``process {queue}`` span (kind CONSUMER), with the messaging semantic conventions'
attributes (``messaging.system`` "gq", ``messaging.destination.name``,
``messaging.message.id``, ``messaging.operation.name`` "publish" / "process",
``messaging.operation.type``) and gq's own (``gq.task``, ``gq.attempt``, ``gq.outcome``).
The publish span's context travels in the envelope's ``headers`` through the global
propagator (W3C ``traceparent``/``tracestate`` by default), so the process span continues
the trace that enqueued the job, and the task's own spans are children of it.
A run that ends in an error ("failed", or ``gq.Kill``) records it and has status ERROR;
``gq.Retry``, a rate limit or a cancel are outcomes the code asked for, not errors.
The application installs and configures the SDK and its exporter; with the API alone,
every span is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

import gq
from gq.tasks.app import App
from gq.tasks.hooks import Attempt, Enqueueing, outcome_of

SYSTEM = "gq"
#: The outcomes that mean the job's work was not done (gq.tasks.hooks.outcome_of).
ERRORS = frozenset({"failed", "kill"})


def instrument(app: App, *, tracer_provider: Any = None) -> App:
    """Trace ``app``'s enqueues and runs with ``tracer_provider`` (the global one when None)."""
    tracer = trace.get_tracer("gq.contrib.otel", gq.__version__, tracer_provider)
    app.on_enqueue(lambda event: _publish(tracer, event))
    app.before_job(lambda attempt: _process(tracer, attempt))
    return app


def _attributes(operation: str, kind: str, queue: str, id: str, task: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": kind,
        "messaging.destination.name": queue,
        "messaging.message.id": id,
        "gq.task": task,
    }


@contextmanager
def _publish(tracer: trace.Tracer, event: Enqueueing) -> Iterator[None]:
    # Not made current: the jobs of one enqueue_many are siblings, not each other's parents.
    span = tracer.start_span(
        f"publish {event.queue}",
        kind=SpanKind.PRODUCER,
        attributes=_attributes("publish", "send", event.queue, event.id, event.task),
    )
    propagate.inject(event.headers, context=trace.set_span_in_context(span))
    try:
        yield
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        span.end()


@contextmanager
def _process(tracer: trace.Tracer, attempt: Attempt) -> Iterator[None]:
    attributes = _attributes("process", "process", attempt.queue, attempt.id, attempt.task)
    attributes["gq.attempt"] = attempt.attempt
    with tracer.start_as_current_span(
        f"process {attempt.queue}",
        context=propagate.extract(attempt.headers),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            outcome = outcome_of(exc)
            span.set_attribute("gq.outcome", outcome)
            if outcome in ERRORS:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        span.set_attribute("gq.outcome", "done")
