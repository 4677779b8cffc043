"""The worker's side of tests/test_contrib_otel.py: a gq-worker of this app exports its
spans with the SDK's ConsoleSpanExporter, one JSON object a line, to $GQ_TEST_OTEL_FILE."""

from __future__ import annotations

import json
import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import gq
import gq.contrib.otel

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "otel")


def one_line(span: ReadableSpan) -> str:
    return json.dumps(json.loads(span.to_json())) + "\n"


provider = TracerProvider(resource=Resource.create({"service.name": "gq-worker"}))
out = open(os.environ["GQ_TEST_OTEL_FILE"], "a", buffering=1)  # noqa: SIM115 - the process's
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=one_line)))
tracer = provider.get_tracer("tests.otel_app")
app = gq.contrib.otel.instrument(gq.App(queue=QUEUE), tracer_provider=provider)


@app.task(name="otel.charge")
def charge(amount: int) -> int:
    with tracer.start_as_current_span("charge the card") as span:
        span.set_attribute("amount", amount)
    return amount


@app.task(name="otel.fails", retries=0)
def fails() -> None:
    raise ValueError("declined")


__all__ = ["app", "trace"]
