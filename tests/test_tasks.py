"""Tasks, the producer's side (SPEC section 14): what enqueue writes, per-call options,
refusals that write nothing, uniqueness."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from typing import Any

import fakeredis
import pytest

import gq
from gq.tasks import envelope
from tests.helpers import Backend
from tests.task_support import make_app, scheduled, stored

UTC = dt.timezone.utc


def queued_ids(backend: Backend, queue: str | None = None) -> list[str]:
    return [i.decode() for i in backend.direct().lrange(f"{queue or backend.queue}:active", 0, -1)]


def test_enqueue_writes_one_envelope_job_with_the_options(backend: Backend) -> None:
    app = make_app(backend, retries=4)

    @app.task(timeout=30, backoff=600)
    def deliver(url: str, payload: dict[str, Any], tenant: str) -> int:
        return 200

    result = deliver.enqueue("https://example.com/hook", {"event": "paid"}, tenant="acme")
    assert isinstance(result, gq.Result)
    assert (result.queue, result.task) == (backend.queue, deliver.name)
    assert (
        deliver.name
        == f"{__name__}.test_enqueue_writes_one_envelope_job_with_the_options.<locals>.deliver"
    )
    assert queued_ids(backend) == [result.id]
    job = stored(backend, result.id)
    assert job is not None and job.attempt == 0
    env = envelope.decode(job.data)
    assert env.task == deliver.name
    assert env.args == ["https://example.com/hook", {"event": "paid"}]
    assert env.kwargs == {"tenant": "acme"}
    assert env.opts == {"retries": 4, "timeout": 30.0, "backoff": 600.0}


def test_delay_is_enqueue_and_a_plain_call_runs_here(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5  # nothing written
    assert queued_ids(backend) == []
    result = add.delay(1, 2)
    assert queued_ids(backend) == [result.id]


def test_using_after_at_id_queue_and_headers(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def ping(n: int) -> None: ...

    before = time.time()
    later = ping.using(after=60).enqueue(1)
    at = ping.using(at=dt.datetime.fromtimestamp(before + 3600, UTC)).enqueue(2)
    named = ping.using(id="invoice-42", headers={"trace": "t-1"}).enqueue(3)
    elsewhere = ping.using(queue=f"{backend.queue}-low").enqueue(4)
    due = scheduled(backend)
    assert before + 55 < due[later.id] < time.time() + 65  # on the Redis clock
    assert due[at.id] == pytest.approx(before + 3600, abs=0.01)
    assert named.id == "invoice-42" and queued_ids(backend) == ["invoice-42"]
    job = stored(backend, "invoice-42")
    assert job is not None and envelope.decode(job.data).headers == {"trace": "t-1"}
    assert elsewhere.queue == f"{backend.queue}-low"
    assert queued_ids(backend, elsewhere.queue) == [elsewhere.id]
    with pytest.raises(gq.JobAlreadyExistsError):
        ping.using(id="invoice-42").enqueue(5)


def test_enqueue_many_keeps_order_and_takes_signatures(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def deliver(url: str, payload: dict[str, Any], tenant: str = "-") -> None: ...

    results = deliver.enqueue_many(
        [("https://a", {}, "acme"), ("https://b", {}), deliver.s("https://c", {}, tenant="x")]
    )
    assert queued_ids(backend) == [r.id for r in results]
    args = [envelope.decode(stored(backend, r.id).data) for r in results]  # type: ignore[union-attr]
    assert [(e.args, e.kwargs) for e in args] == [
        (["https://a", {}, "acme"], {}),
        (["https://b", {}], {}),
        (["https://c", {}], {"tenant": "x"}),
    ]


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda t: t.enqueue(1, 2, 3), "do not bind"),
        (lambda t: t.enqueue("u", colour=1), "do not bind"),
        (lambda t: t.enqueue("u", when=dt.datetime(2030, 1, 1)), 'kwargs["when"]'),
        (lambda t: t.enqueue("u", {"a": {"b": [object()]}}), 'args[1]["a"]["b"][0]'),
        (lambda t: t.enqueue_many([("ok",), ("bad", uuid.uuid4())]), "args[1]"),
        (lambda t: t.enqueue_many([("ok",), ()]), "do not bind"),
    ],
)
def test_refused_calls_write_nothing(backend: Backend, call: Any, words: str) -> None:
    app = make_app(backend)

    @app.task
    def deliver(url: str, payload: Any = None, *, when: Any = None) -> None: ...

    with pytest.raises(TypeError, match=words.replace("[", r"\[")):
        call(deliver)
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_two_tasks_under_one_name_are_refused_at_registration() -> None:
    app = gq.App(url="fakeredis://names")

    @app.task(name="send")
    def first() -> None: ...

    with pytest.raises(gq.ConfigurationError, match="two tasks are named 'send'"):

        @app.task(name="send")
        def second() -> None: ...

    assert app.tasks["send"].fn is first.fn


@pytest.mark.parametrize(
    "options",
    [{"retries": -1}, {"timeout": 0}, {"backoff": "x"}, {"colour": 1}, {"unique_key": "k"}],
)
def test_bad_options_are_configuration_errors(options: dict[str, Any]) -> None:
    app = gq.App(url="fakeredis://options")
    with pytest.raises(gq.ConfigurationError):
        app.task(**options)


def test_unique_for_returns_the_unfinished_job(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(unique_for=600)
    def report(day: str, *, kind: str = "full") -> None: ...

    first = report.enqueue("monday", kind="full")
    assert report.enqueue("monday", kind="full") == first  # the same job, nothing added
    other = report.enqueue("tuesday")
    assert other != first
    assert queued_ids(backend) == [first.id, other.id]
    # one batch: its second call finds the lock its first one took
    many = report.enqueue_many([("wednesday",), ("wednesday",)])
    assert many[0] == many[1]
    assert len(queued_ids(backend)) == 3


def test_unique_key_and_the_lock_free_once_the_job_finished(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(unique_for=600, unique_key="tenant-acme")
    def sync(n: int) -> None: ...

    first = sync.enqueue(1)
    assert sync.enqueue(2) == first  # other arguments, the same key
    lock = f"{backend.queue}:unique:{sync.name}:key:tenant-acme"
    assert backend.direct().get(lock) == first.id.encode()
    assert 590_000 < backend.direct().pttl(lock) <= 600_000
    # finished (acknowledged: gone from the data hash): the next enqueue adds a job
    client = backend.direct()
    client.hdel(f"{backend.queue}:data", first.id)
    client.lrem(f"{backend.queue}:active", 0, first.id)
    second = sync.enqueue(3)
    assert second != first and queued_ids(backend) == [second.id]
    # dead counts as finished too
    client.zadd(f"{backend.queue}:dead", {second.id: time.time()})
    assert sync.enqueue(4) != second


def test_unique_for_scheduled_and_per_call(backend: Backend) -> None:
    app = make_app(backend)

    @app.task
    def ping(n: int) -> None: ...

    first = ping.using(unique_for=60, after=30).enqueue(1)
    assert ping.using(unique_for=60, after=30).enqueue(1) == first
    assert list(scheduled(backend)) == [first.id]
    assert ping.enqueue(1) != first  # no unique_for on this call


def test_expires_travels_as_absolute_server_time(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(expires=60)
    def ping() -> None: ...

    when = dt.datetime(2040, 1, 1, tzinfo=UTC)
    relative = envelope.decode(stored(backend, ping.enqueue().id).data)  # type: ignore[union-attr]
    absolute = ping.using(expires=when).enqueue()
    fixed = envelope.decode(stored(backend, absolute.id).data)  # type: ignore[union-attr]
    assert relative.opts["expires"] == pytest.approx(time.time() + 60, abs=5)
    assert fixed.opts["expires"] == when.timestamp()


def test_aenqueue_from_asyncio(backend: Backend) -> None:
    if backend.kind == "fake":
        server = backend.server  # type: ignore[attr-defined]
        app = gq.App(client=backend.client(), aclient=fakeredis.FakeAsyncRedis(server=server),
                     queue=backend.queue)  # fmt: skip
    else:
        app = gq.App(url=backend.url, queue=backend.queue)

    @app.task(unique_for=60)
    def ping(n: int) -> None: ...

    async def main() -> tuple[gq.Result[None], gq.Result[None]]:
        return await ping.aenqueue(1), await ping.aenqueue(1)

    first, again = asyncio.run(main())
    assert first == again and queued_ids(backend) == [first.id]


def test_an_app_without_redis_says_so() -> None:
    app = gq.App()

    @app.task
    def ping() -> None: ...

    with pytest.raises(gq.ConfigurationError, match="url= or client="):
        ping.enqueue()


def test_periodic_entries_carry_the_signature(backend: Backend) -> None:
    app = make_app(backend)

    @app.task(retries=2)
    def report(kind: str) -> None: ...

    entry = app.periodic("nightly", report.s("daily"), cron="0 3 * * *", tz="Europe/Paris")
    assert app.schedules == [entry]
    env = envelope.decode(entry.data)
    assert (env.task, env.args, env.opts) == (report.name, ["daily"], {"retries": 2})
    with pytest.raises(gq.ConfigurationError, match="two periodic"):
        app.periodic("nightly", report.s("x"), every=60)
    with pytest.raises(TypeError, match="do not bind"):
        app.periodic("bad", report.s(), every=60)  # type: ignore[call-arg]
