"""Workflow jobs and gq.contrib.otel with the real OpenTelemetry SDK, offline (issue 31,
defect 5): every step, member and callback carries a traceparent of the trace that
enqueued the workflow, the later steps written by the ack script included."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import gq  # noqa: E402
import gq.contrib.otel  # noqa: E402
from tests.helpers import Backend, wait_until  # noqa: E402
from tests.task_support import Running, make_app, run_app  # noqa: E402

__all__ = ["run_app"]  # the fixture


def test_every_workflow_job_carries_the_enqueuing_trace(
    backend: Backend, run_app: Running
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    app = gq.contrib.otel.instrument(make_app(backend), tracer_provider=provider)
    seen: dict[str, str] = {}

    @app.task(name="otel.step")
    def step(x: int) -> int:
        job = gq.current_job()
        assert job is not None
        seen[job.id] = dict(job.headers).get("traceparent", "")
        return x + 1

    with provider.get_tracer("test").start_as_current_span("request") as request:
        trace_id = format(request.get_span_context().trace_id, "032x")
        c = gq.chain(step.s(1), step.s(), step.s()).enqueue()
        g = gq.group(step.s(1), step.s(2)).then(step.si(0)).enqueue()
    run_app(app)
    assert c.get(timeout=10) == 4 and g.get(timeout=10) == 1
    ids: list[Any] = [i for _, i, _ in c.steps] + [m[1] for m in g.members] + [f"{g.id}.then"]
    wait_until(lambda: len(seen) == len(ids), 10)
    assert sorted(seen) == sorted(ids)
    assert all(value.split("-")[1] == trace_id for value in seen.values()), seen
