"""gq.contrib.otel with the real OpenTelemetry SDK, offline: the producer's spans in an
InMemorySpanExporter, a real gq-worker process's spans exported by the SDK's
ConsoleSpanExporter to a file (tests/otel_app.py); one trace from enqueue to run."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import gq  # noqa: E402
import gq.contrib.otel  # noqa: E402
from tests.cli_support import Worker, env_for  # noqa: E402
from tests.helpers import Backend, RedisServer, delete_keys, wait_until  # noqa: E402
from tests.task_support import make_app, run_app  # noqa: E402

__all__ = ["run_app"]  # the fixture


@pytest.fixture
def exporter() -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def producer_app(url: str, queue: str, provider: TracerProvider) -> tuple[gq.App, Any]:
    """The web side: the same task names as tests/otel_app.py, no bodies."""
    app = gq.contrib.otel.instrument(gq.App(url=url, queue=queue), tracer_provider=provider)

    @app.task(name="otel.charge")
    def charge(amount: int) -> int: ...

    @app.task(name="otel.fails", retries=0)
    def fails() -> None: ...

    return app, (charge, fails)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_otel_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def spans_in(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_one_trace_from_the_enqueue_to_the_run_in_a_gq_worker_process(
    redis_server: RedisServer, queue: str, tmp_path: Path, exporter: Any
) -> None:
    provider, memory = exporter
    _, (charge, fails) = producer_app(redis_server.url, queue, provider)
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("POST /pay") as web:
        paid = charge.enqueue(5)
        failed = fails.enqueue()
    out = tmp_path / "spans.jsonl"
    env = env_for(redis_server.url, None, GQ_TEST_TASK_QUEUE=queue, GQ_TEST_OTEL_FILE=str(out))
    worker = Worker(tmp_path, "tests.otel_app:app", "--burst", env=env)
    assert worker.wait(60) == 0, worker.output
    spans = spans_in(out)

    published = {s.attributes["messaging.message.id"]: s for s in memory.get_finished_spans()
                 if s.kind == SpanKind.PRODUCER}  # fmt: skip
    assert set(published) == {paid.id, failed.id}
    publish = published[paid.id]
    assert publish.name == f"publish {queue}"
    assert publish.parent is not None and publish.parent.span_id == web.get_span_context().span_id
    assert dict(publish.attributes) == {
        "messaging.system": "gq", "messaging.operation.name": "publish",
        "messaging.operation.type": "send", "messaging.destination.name": queue,
        "messaging.message.id": paid.id, "gq.task": "otel.charge",
    }  # fmt: skip

    trace_id = f"0x{web.get_span_context().trace_id:032x}"
    by_job = {s["attributes"].get("messaging.message.id"): s for s in spans
              if s["kind"] == "SpanKind.CONSUMER"}  # fmt: skip
    process = by_job[paid.id]
    assert process["name"] == f"process {queue}"
    assert process["context"]["trace_id"] == trace_id  # one trace, across the processes
    assert process["parent_id"] == f"0x{publish.context.span_id:016x}"
    assert process["attributes"]["messaging.operation.name"] == "process"
    assert process["attributes"]["gq.outcome"] == "done"
    assert process["attributes"]["gq.task"] == "otel.charge"
    assert process["status"]["status_code"] == "UNSET"
    inner = next(s for s in spans if s["name"] == "charge the card")
    assert inner["parent_id"] == process["context"]["span_id"]  # the task's spans nest
    assert inner["context"]["trace_id"] == trace_id

    broken = by_job[failed.id]
    assert broken["status"]["status_code"] == "ERROR"
    assert broken["attributes"]["gq.outcome"] == "failed"
    assert [e["name"] for e in broken["events"]] == ["exception"]
    assert broken["events"][0]["attributes"]["exception.type"] == "ValueError"


def test_enqueue_many_publishes_sibling_spans_and_a_retry_is_not_an_error(
    backend: Backend, run_app: Any, exporter: Any
) -> None:
    provider, memory = exporter
    app = gq.contrib.otel.instrument(make_app(backend), tracer_provider=provider)
    seen: list[dict[str, str]] = []

    @app.task(name="again", retries=1)
    def again(n: int) -> None:
        job = gq.current_job()
        assert job is not None
        seen.append(dict(job.headers))
        if job.attempt == 0:
            raise gq.Retry(after=0)

    with provider.get_tracer("tests").start_as_current_span("batch") as batch:
        again.enqueue_many([(1,), (2,)])
    run_app(app)
    wait_until(lambda: len([s for s in memory.get_finished_spans()
                            if s.kind == SpanKind.CONSUMER]) == 4)  # fmt: skip
    spans = memory.get_finished_spans()
    publishes = [s for s in spans if s.kind == SpanKind.PRODUCER]
    parents = [s.parent.span_id for s in publishes if s.parent]
    assert parents == [batch.get_span_context().span_id] * 2
    assert all("traceparent" in headers for headers in seen)
    runs = [s for s in spans if s.kind == SpanKind.CONSUMER]
    assert {s.parent.span_id for s in runs if s.parent} == {p.context.span_id for p in publishes}
    outcomes = sorted((s.attributes["gq.attempt"], s.attributes["gq.outcome"]) for s in runs)
    assert outcomes == [(0, "retry"), (0, "retry"), (1, "done"), (1, "done")]
    assert all(s.status.status_code == StatusCode.UNSET for s in runs)


def test_a_refused_enqueue_ends_its_span_with_the_error(backend: Backend, exporter: Any) -> None:
    provider, memory = exporter
    app = gq.contrib.otel.instrument(make_app(backend), tracer_provider=provider)

    @app.task(name="once")
    def once() -> None: ...

    once.using(id="same").enqueue()
    with pytest.raises(gq.JobAlreadyExistsError):
        once.using(id="same").enqueue()
    first, second = memory.get_finished_spans()
    assert first.status.status_code == StatusCode.UNSET
    assert second.status.status_code == StatusCode.ERROR
    assert second.events[0].attributes["exception.type"] == "gq.errors.JobAlreadyExistsError"
