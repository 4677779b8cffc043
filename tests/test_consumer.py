"""The "NewConsumer" and "Public API" describes of curlyq's consumer_test.go, case by case.

Mapping: Go's ``Consume(handler, SIGALRM)`` is ``consume(handler, signals=[SIGALRM])`` and
``ConsumeCtx`` + cancel is ``run(handler)`` + ``stop()``, each in its own greenlet; a
handler returning an error is one raising an Exception, a panic is one raising a
BaseException that is not an Exception (``Panic``); ``server.Close()`` is
``backend.outage()``. Options the Go tests change after construction are changed on
``consumer.opts``, which the running consumer reads live. Jobs are written into Redis
the way curlyq writes them (tests/curlyq_state.py), never through gq's Producer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import gevent
import pytest
import redis
from gevent.event import Event
from gevent.queue import Queue
from redis.commands.core import Script

import gq
from gq.errors import (
    AckJobError,
    ConfigurationError,
    KillJobError,
    MaxBackoffExceededError,
    RetryJobError,
    ShutdownTimeoutError,
)
from gq.job import Job
from gq.store.connection import client_from_url
from gq.store.keys import QueueKeys
from tests.curlyq_state import (
    assign_jobs,
    create_jobs,
    enqueue_jobs,
    ids,
    register_consumer,
    schedule_jobs,
    server_now,
    stored_job,
    texts,
)
from tests.helpers import NO_RETRY, Backend, stays_true, wait_until

# ============================================================================ NewConsumer


def test_new_consumer_returns_a_valid_consumer(backend: Backend) -> None:
    client = backend.client()
    consumer = gq.Consumer(backend.queue, client=client)

    assert consumer._queue.client is client
    assert consumer.queue == backend.queue
    parsed = uuid.UUID(consumer.id)
    assert parsed.version == 4
    assert str(parsed) == consumer.id
    assert consumer.inflight_key == f"{backend.queue}:inflight:{consumer.id}"


def test_new_consumer_loads_all_of_the_expected_lua_scripts(backend: Backend) -> None:
    client = backend.client()
    consumer = gq.Consumer(backend.queue, client=client)

    # curlyq's ackJob, enqueueScheduledJobs, getJobs, killJob, reenqueueActiveJobs,
    # reenqueueOrphanedJobs (two steps in gq), registerConsumer and retryJob scripts.
    expected = (
        "ack",
        "enqueue_due",
        "fetch",
        "kill",
        "requeue",
        "expired_consumers",
        "recover",
        "register",
        "retry",
    )
    for name in expected:
        script = consumer._queue._scripts[name]
        assert isinstance(script, Script), name
        # The server compiles it and knows it by the sha the client will call.
        assert client.script_load(script.script) == script.sha, name


def test_new_consumer_generates_a_client_based_on_the_provided_url(backend: Backend) -> None:
    if backend.kind == "real":
        url = backend.url
        writer = backend.client()
    else:
        # fakeredis has no address: gq's fakeredis://NAME is a server shared by name.
        url = f"fakeredis://{backend.queue}"
        writer = client_from_url(url)
    assert url is not None
    consumer = gq.Consumer(backend.queue, url=url)

    assert consumer._queue.client is not writer
    key = f"{backend.queue}:a"
    writer.set(key, b"b")
    assert consumer._queue.client.get(key) == b"b"


def test_new_consumer_uses_client_instead_of_url_when_both_are_provided(backend: Backend) -> None:
    client = backend.client()
    consumer = gq.Consumer(backend.queue, url="redis://some.random.address:6379/0", client=client)

    assert consumer._queue.client is client
    consumer._queue.register(consumer.id)  # reaches the client's server, not the address
    assert backend.direct().zscore(QueueKeys(backend.queue).consumers, consumer.inflight_key)


def test_new_consumer_raises_when_neither_a_redis_client_nor_url_is_provided(
    backend: Backend,
) -> None:
    with pytest.raises(ConfigurationError):
        gq.Consumer(backend.queue)


@pytest.mark.parametrize("queue", ["", None])
def test_new_consumer_raises_when_a_queue_is_not_provided(backend: Backend, queue: Any) -> None:
    with pytest.raises(ConfigurationError):
        gq.Consumer(queue, client=backend.client())


@pytest.mark.parametrize(
    "options",
    [
        {"no_such_option": 1},
        {"processor_concurrency": 0},
        {"poller_buffer_size": -1},
        {"job_max_attempts": 2.5},
        {"shutdown_grace_period": -1},
        {"heartbeat_poll_interval": "60"},
    ],
    ids=[
        "unknown",
        "zero-concurrency",
        "negative-buffer",
        "float-count",
        "negative-duration",
        "string-duration",
    ],
)
def test_new_consumer_raises_on_bad_options(backend: Backend, options: dict[str, Any]) -> None:
    # gq only: curlyq takes any value; SPEC 2 wants a ConfigurationError naming the option.
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        gq.Consumer(backend.queue, client=backend.client(), **options)


def test_new_consumer_applies_the_correct_default_options(backend: Backend) -> None:
    consumer = gq.Consumer(backend.queue, client=backend.client())

    hour = 3600.0
    assert dataclasses.asdict(consumer.opts) == {
        "job_max_attempts": 20,
        "job_max_backoff": 168 * hour,
        "shutdown_grace_period": None,  # curlyq's 0: wait for running jobs forever
        # gq's lease (issue 32): 5 s + 20 s, not curlyq's 60 s + 60 s; each consumer
        # states its own, so Go consumers are still judged by theirs
        "custodian_consumer_timeout": 20.0,
        "custodian_max_attempts": 0,
        "custodian_max_backoff": 30.0,
        "custodian_max_jobs": 50,
        "custodian_poll_interval": 5.0,
        "custodian_unstated_lease": 120.0,  # gq's: a curlyq consumer states no lease
        "heartbeat_max_attempts": 0,
        "heartbeat_max_backoff": 30.0,
        "heartbeat_poll_interval": 5.0,
        "poller_buffer_size": "auto",  # gq's default (curlyq's was 10)
        "poller_max_attempts": 0,
        "poller_max_backoff": 30.0,
        "poller_poll_duration": 5.0,
        "processor_concurrency": 5,
        "scheduler_max_attempts": 0,
        "scheduler_max_backoff": 30.0,
        "scheduler_max_jobs": 50,
        "scheduler_poll_interval": 5.0,
        # gq's own options
        "job_max_recoveries": 3,
        "job_timeout": None,
        "dead_max_jobs": 10_000,
        "dead_max_age": 180 * 24 * hour,
        "hub_block_warning": 1.0,
        "poller_buffer_max": 1000,
        "scheduler_wake": True,  # wakes for the earliest due time, not only at each poll
    }


def test_new_consumer_applies_the_minimum_values_to_relevant_options(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gq.options")
    consumer = gq.Consumer(
        backend.queue,
        client=backend.client(),
        custodian_consumer_timeout=1,
        heartbeat_poll_interval=0.5,
        poller_poll_duration=timedelta(milliseconds=500),
    )

    assert consumer.opts.custodian_consumer_timeout == 5.0
    assert consumer.opts.heartbeat_poll_interval == 1.0
    assert consumer.opts.poller_poll_duration == 1.0
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    for name in ("custodian_consumer_timeout", "heartbeat_poll_interval", "poller_poll_duration"):
        assert name in warned


# ============================================================================ Public API


class Panic(BaseException):
    """The nearest thing to a Go panic: not an Exception, and not GreenletExit either."""


Handler = Callable[[Job], object]


class Started:
    """A consumer running in its own greenlet (the Go suite's ``start``)."""

    def __init__(
        self, consumer: gq.Consumer, handler: Handler, signals: Sequence[int] | None
    ) -> None:
        self.consumer = consumer
        if signals is None:
            self.greenlet = gevent.spawn(self._call, consumer.run, handler)
        else:
            self.greenlet = gevent.spawn(self._call, consumer.consume, handler, signals=signals)

    @staticmethod
    def _call(function: Callable[..., None], *args: Any, **kwargs: Any) -> Exception | None:
        # The error is the greenlet's value, so gevent prints no traceback for it.
        try:
            function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the error is the result, for the test to check
            return exc
        return None

    def result(self, timeout: float = 10.0) -> Exception | None:
        """What run/consume ended with: None after a clean stop, else the error raised."""
        wait_until(self.greenlet.ready, timeout=timeout, message="the consumer to return")
        return self.greenlet.get()  # type: ignore[no-any-return]

    def running(self) -> bool:
        return not self.greenlet.ready()


class Gate:
    """Handlers that report they started (``started``) and wait for ``release``."""

    def __init__(self) -> None:
        self.started: Queue[str] = Queue()
        self.release = Event()

    def wait_started(self, count: int = 1, timeout: float = 10.0) -> list[str]:
        return [self.started.get(timeout=timeout) for _ in range(count)]

    def blocking(self, then: Callable[[], object] | None = None) -> Handler:
        def handler(job: Job) -> object:
            self.started.put(job.id)
            self.release.wait()
            return then() if then is not None else None

        return handler


@pytest.fixture
def client(backend: Backend) -> redis.Redis:
    # Like the clients gq builds from a URL: no retries inside redis-py, so an outage
    # fails the call at once and the *_max_attempts options mean what they say.
    return backend.client(retry=NO_RETRY)


@pytest.fixture
def direct(backend: Backend) -> redis.Redis:
    """The test's own view of Redis, reachable during an outage."""
    return backend.direct()


@pytest.fixture
def keys(backend: Backend) -> QueueKeys:
    return QueueKeys(backend.queue)


@pytest.fixture
def consumer(backend: Backend, client: redis.Redis) -> gq.Consumer:
    consumer = gq.Consumer(
        backend.queue,
        client=client,
        shutdown_grace_period=2,
        processor_concurrency=2,
        poller_buffer_size=4,
        poller_poll_duration=1,
        job_max_attempts=10,
    )
    # Below the 1 s minimum, so that a stop or an outage is seen quickly; fakeredis cannot
    # interrupt a blocking wait, so this also bounds how long an outage goes unnoticed.
    consumer.opts.poller_poll_duration = 0.2
    return consumer


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def start(consumer: gq.Consumer, gate: Gate) -> Iterator[Callable[..., Started]]:
    """``start(handler)`` runs ``consumer.run``; ``start(handler, signals=[...])`` consume."""
    runs: list[Started] = []

    def start_(handler: Handler, *, signals: Sequence[int] | None = None) -> Started:
        run = Started(consumer, handler, signals)
        runs.append(run)
        return run

    yield start_
    # The Go AfterEach waits for every process of the consumer; here every run must end.
    gate.release.set()
    for run in runs:
        consumer.stop()
        run.greenlet.join(timeout=5)
        if not run.greenlet.dead:
            run.greenlet.kill(block=True, timeout=5)
            pytest.fail("the consumer did not stop within 5 s of stop() at teardown")


def inflight(direct: redis.Redis, consumer: gq.Consumer) -> set[str]:
    return set(texts(direct.smembers(consumer.inflight_key)))


def active(direct: redis.Redis, keys: QueueKeys) -> list[str]:
    return texts(direct.lrange(keys.active, 0, -1))


def wait_registered(direct: redis.Redis, keys: QueueKeys, consumer: gq.Consumer) -> None:
    wait_until(
        lambda: texts(direct.zrange(keys.consumers, 0, -1)) == [consumer.inflight_key],
        message="the consumer to register",
    )


# ---------------------------------------------------------------------------- Consume


@pytest.fixture(autouse=True)
def sigalrm_guard() -> Iterator[None]:
    """A harmless SIGALRM handler while a test runs, restored to the default after it.

    The Consume tests send SIGALRM to this process; should consume() ever fail to install
    its own handler, the default action would end the whole test session instead of
    failing one test (which then times out waiting for the stop).
    """
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_consume_shuts_down_when_the_process_is_killed(
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.shutdown_grace_period = 5
    run = start(gate.blocking(), signals=[signal.SIGALRM])
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    gate.wait_started()  # consume is running, so its SIGALRM handler is installed

    os.kill(os.getpid(), signal.SIGALRM)
    assert run.running()  # a graceful stop: the running job may finish
    gate.release.set()

    assert run.result() is None
    assert direct.hget(keys.data, jobs[0].id) is None  # the job finished and was acked
    assert inflight(direct, consumer) == set()


def test_consume_returns_an_error_when_a_job_doesnt_finish_in_shutdown_grace_period(
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.shutdown_grace_period = 0.5
    run = start(gate.blocking(), signals=[signal.SIGALRM])
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    gate.wait_started()

    os.kill(os.getpid(), signal.SIGALRM)

    error = run.result(timeout=5)
    assert isinstance(error, ShutdownTimeoutError)
    assert error.unfinished == 1
    assert inflight(direct, consumer) == {jobs[0].id}  # left for another custodian


def test_consume_bubbles_up_errors_from_the_underlying_run(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    give_up_quickly(consumer)
    run = start(gate.blocking(then=backend.outage), signals=[signal.SIGALRM])
    enqueue_jobs(direct, keys, create_jobs(1, 0))
    gate.wait_started()
    gate.release.set()

    assert isinstance(run.result(), AckJobError)


# ---------------------------------------------------------------------------- ConsumeCtx


def test_run_shuts_down_when_stopped(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    # Go: "Shuts down when the context is canceled".
    run = start(lambda job: None)
    wait_registered(direct, keys, consumer)

    consumer.stop()

    assert run.result(timeout=3) is None
    assert direct.zcard(keys.consumers) == 0  # a clean stop with nothing in flight deregisters


def test_run_returns_an_error_when_a_job_doesnt_finish_in_shutdown_grace_period(
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.shutdown_grace_period = 0.5
    run = start(gate.blocking())
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    gate.wait_started()

    consumer.stop()

    error = run.result(timeout=5)
    assert isinstance(error, ShutdownTimeoutError)
    assert error.unfinished == 1
    assert error.grace_period == 0.5
    assert inflight(direct, consumer) == {jobs[0].id}


def test_run_does_not_continue_to_make_requests_after_a_forced_shutdown(
    consumer: gq.Consumer,
    client: redis.Redis,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.shutdown_grace_period = 0.5
    # Loops that would, if still alive, call Redis several times in the observation window.
    consumer.opts.heartbeat_poll_interval = 0.1
    consumer.opts.scheduler_poll_interval = 0.1
    consumer.opts.custodian_poll_interval = 0.1
    calls = count_commands(client)
    run = start(gate.blocking())
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    gate.wait_started()

    consumer.stop()
    assert isinstance(run.result(timeout=5), ShutdownTimeoutError)
    gate.release.set()  # in Go the handler then returns; nothing may acknowledge it

    sent = len(calls)
    stays_true(
        lambda: len(calls) == sent and inflight(direct, consumer) == {jobs[0].id},
        1.5,
        message="no Redis command after the forced shutdown, the job still in flight",
    )


def count_commands(client: redis.Redis) -> list[object]:
    """Record every command ``client`` sends from now on (scripts and BLMOVE included)."""
    calls: list[object] = []
    original = client.execute_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return original(*args, **kwargs)

    client.execute_command = counting  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("grace", [0, None])
def test_run_waits_indefinitely_for_jobs_to_finish_if_shutdown_grace_period_is_zero(
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
    grace: float | None,
) -> None:
    consumer.opts.shutdown_grace_period = grace
    run = start(gate.blocking())
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    gate.wait_started()

    consumer.stop()

    # Go watches for 3 s; 1 s is already twice the grace periods used above.
    stays_true(run.running, 1.0, message="run() to keep waiting for the running job")
    gate.release.set()
    assert run.result() is None
    assert direct.hget(keys.data, jobs[0].id) is None


def test_run_immediately_returns_an_error_if_redis_is_unavailable_when_starting_up(
    backend: Backend, start: Callable[..., Started]
) -> None:
    backend.outage()

    run = start(lambda job: None)

    assert isinstance(run.result(timeout=3), redis.ConnectionError)


def test_run_processes_jobs_off_the_queue(
    start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    jobs = create_jobs(5, 0)
    enqueue_jobs(direct, keys, jobs)
    processed: list[str] = []

    start(lambda job: processed.append(job.id))

    wait_until(lambda: sorted(processed) == sorted(ids(jobs)), message="every job to run")
    wait_until(lambda: active(direct, keys) == [], message="the active list to empty")
    wait_until(lambda: direct.hlen(keys.data) == 0, message="every job to be acknowledged")
    assert len(processed) == 5  # each job ran once


def check_failed_jobs_land_in(
    start: Callable[..., Started],
    direct: redis.Redis,
    keys: QueueKeys,
    failure: BaseException,
    attempt: int,
    target: str,
) -> None:
    """Jobs whose handler raises ``failure`` at ``attempt`` end in ``target`` (scheduled or
    dead), stored with attempt + 1, and nowhere else."""
    jobs = create_jobs(5, attempt)
    enqueue_jobs(direct, keys, jobs)

    def handler(job: Job) -> None:
        raise failure

    start(handler)

    wait_until(
        lambda: sorted(texts(direct.zrange(target, 0, -1))) == sorted(ids(jobs)),
        message=f"every job to land in {target}",
    )
    assert active(direct, keys) == []
    other = keys.dead if target == keys.scheduled else keys.scheduled
    assert direct.zcard(other) == 0
    for job in jobs:
        assert stored_job(direct, keys, job.id) == Job(job.id, job.data, attempt + 1)


def test_run_reschedules_jobs_that_return_an_error_with_less_than_job_max_attempts(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    attempt = consumer.opts.job_max_attempts - 1
    check_failed_jobs_land_in(start, direct, keys, RuntimeError("Retry"), attempt, keys.scheduled)


def test_run_reschedules_jobs_that_panic_with_less_than_job_max_attempts(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    attempt = consumer.opts.job_max_attempts - 1
    check_failed_jobs_land_in(start, direct, keys, Panic("Retry"), attempt, keys.scheduled)


def test_run_kills_jobs_that_return_an_error_after_job_max_attempts(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    attempt = consumer.opts.job_max_attempts
    check_failed_jobs_land_in(start, direct, keys, RuntimeError("Fail"), attempt, keys.dead)


def test_run_kills_jobs_that_panic_after_job_max_attempts(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    attempt = consumer.opts.job_max_attempts
    check_failed_jobs_land_in(start, direct, keys, Panic("Fail"), attempt, keys.dead)


def test_run_reenqueues_jobs_when_shutting_down(
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    jobs = create_jobs(10, consumer.opts.job_max_attempts)
    job_ids = ids(jobs)
    enqueue_jobs(direct, keys, jobs)
    processed: list[str] = []

    def handler(job: Job) -> None:
        gate.started.put(job.id)
        gate.release.wait()
        processed.append(job.id)

    run = start(handler)
    assert sorted(gate.wait_started(consumer.opts.processor_concurrency)) == sorted(job_ids[:2])

    # Two running and poller_buffer_size (4) buffered: six taken off the queue.
    wait_until(lambda: active(direct, keys) == job_ids[6:], message="six jobs taken")
    consumer.stop()
    # The four buffered jobs go back to the head of the queue, in order, while the two
    # running ones are still running.
    wait_until(lambda: active(direct, keys) == job_ids[2:], message="buffered jobs given back")
    assert run.running()
    gate.release.set()

    assert run.result() is None
    assert sorted(processed) == sorted(job_ids[:2])
    assert inflight(direct, consumer) == set()
    assert sorted(texts(direct.hkeys(keys.data))) == sorted(job_ids[2:])  # two acked


def give_up_quickly(consumer: gq.Consumer) -> None:
    # gq re-sends a failed ack, retry or kill for custodian_consumer_timeout seconds
    # before it aborts as curlyq does at once (docs/decisions.md); a short budget keeps
    # these ported tests fast without changing what they assert.
    consumer.opts.custodian_consumer_timeout = 0.3


def test_run_aborts_if_it_cannot_acknowledge_a_job(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    give_up_quickly(consumer)
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)

    run = start(gate.blocking(then=backend.outage))
    gate.wait_started()
    gate.release.set()

    error = run.result()
    assert isinstance(error, AckJobError)
    assert error.job == Job(id=jobs[0].id, data=jobs[0].data, attempt=jobs[0].attempt)
    assert isinstance(error.cause, redis.ConnectionError)


def fail_after_outage(backend: Backend) -> Callable[[], object]:
    def fail() -> None:
        backend.outage()
        raise RuntimeError("Error")

    return fail


def test_run_aborts_if_it_cannot_retry_a_job(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    give_up_quickly(consumer)
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)

    run = start(gate.blocking(then=fail_after_outage(backend)))
    gate.wait_started()
    gate.release.set()

    error = run.result()
    assert isinstance(error, RetryJobError)
    assert error.job == Job(id=jobs[0].id, data=jobs[0].data, attempt=jobs[0].attempt + 1)
    assert isinstance(error.cause, redis.ConnectionError)


def test_run_aborts_if_it_cannot_kill_a_job(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    gate: Gate,
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    give_up_quickly(consumer)
    jobs = create_jobs(1, consumer.opts.job_max_attempts)
    enqueue_jobs(direct, keys, jobs)

    run = start(gate.blocking(then=fail_after_outage(backend)))
    gate.wait_started()
    gate.release.set()

    error = run.result()
    assert isinstance(error, KillJobError)
    assert error.job == Job(id=jobs[0].id, data=jobs[0].data, attempt=jobs[0].attempt + 1)
    assert isinstance(error.cause, redis.ConnectionError)


def test_run_periodically_updates_the_heartbeat(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    consumer.opts.heartbeat_poll_interval = 0.1
    start(lambda job: None)
    seen: list[float] = []

    def advanced_three_times() -> bool:
        stored = direct.zrange(keys.consumers, 0, -1, withscores=True)
        if stored:
            assert [member.decode() for member, _ in stored] == [consumer.inflight_key]
            score = stored[0][1]
            if not seen or score > seen[-1]:
                seen.append(score)
        return len(seen) >= 3

    wait_until(advanced_three_times, timeout=5, interval=0.02, message="the heartbeat to advance")


def test_run_enqueues_scheduled_jobs_that_are_due_to_be_run(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    consumer.opts.scheduler_max_jobs = 3
    due_jobs, later_jobs = create_jobs(5, 0), create_jobs(5, 0)
    now = server_now(direct)
    schedule_jobs(direct, keys, due_jobs, now)
    schedule_jobs(direct, keys, later_jobs, now + 300)
    processed: list[str] = []

    start(lambda job: processed.append(job.id))

    # 3 s, under the 5 s scheduler interval: the full first pass (3 of 5) must repeat at once.
    wait_until(
        lambda: sorted(processed) == sorted(ids(due_jobs)), timeout=3, message="the due jobs to run"
    )
    assert sorted(texts(direct.zrange(keys.scheduled, 0, -1))) == sorted(ids(later_jobs))


def test_run_cleans_up_jobs_orphaned_by_dead_consumers(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.custodian_max_jobs = 3
    inflight_jobs, orphaned_jobs = create_jobs(5, 0), create_jobs(5, 0)
    dead_consumer = gq.Consumer(backend.queue, client=direct)
    live_consumer = gq.Consumer(backend.queue, client=direct)
    now = server_now(direct)
    # It wrote no facts, as a curlyq consumer: it is judged by the lease of a consumer that
    # states none (curlyq's, by default), not by gq's shorter one.
    timeout = consumer.opts.custodian_unstated_lease
    register_consumer(direct, keys, dead_consumer.inflight_key, now - timeout)
    assign_jobs(direct, keys, orphaned_jobs, dead_consumer.inflight_key)
    register_consumer(direct, keys, live_consumer.inflight_key, now)
    assign_jobs(direct, keys, inflight_jobs, live_consumer.inflight_key)
    processed: list[str] = []

    start(lambda job: processed.append(job.id))

    # 3 s, far under a custodian interval of 60 s: the full first pass must repeat at once.
    wait_until(
        lambda: sorted(processed) == sorted(ids(orphaned_jobs)),
        timeout=3,
        message="the orphaned jobs to run",
    )
    assert inflight(direct, dead_consumer) == set()
    assert inflight(direct, live_consumer) == set(ids(inflight_jobs))
    assert sorted(texts(direct.zrange(keys.consumers, 0, -1))) == sorted(
        [consumer.inflight_key, live_consumer.inflight_key]
    )


def check_aborts(run: Started, process: str, attempts: int, cause: type[Exception]) -> None:
    error = run.result(timeout=5)
    assert isinstance(error, MaxBackoffExceededError)
    assert (error.process, error.attempt) == (process, attempts)
    assert isinstance(error.__cause__, cause)


def test_run_aborts_if_the_poller_cannot_poll_redis_after_poller_max_attempts(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    direct: redis.Redis,
    keys: QueueKeys,
) -> None:
    consumer.opts.poller_max_attempts = 2
    consumer.opts.poller_max_backoff = 0.1
    run = start(lambda job: None)
    wait_registered(direct, keys, consumer)

    backend.outage()

    check_aborts(run, "Poller", 2, redis.ConnectionError)


def test_run_aborts_if_the_poller_cannot_retrieve_jobs_from_redis_after_poller_max_attempts(
    consumer: gq.Consumer, start: Callable[..., Started], direct: redis.Redis, keys: QueueKeys
) -> None:
    consumer.opts.poller_max_attempts = 2
    consumer.opts.poller_max_backoff = 0.1
    jobs = create_jobs(1, 0)
    enqueue_jobs(direct, keys, jobs)
    # Force an error in the fetch script with a key of the wrong type.
    direct.hset(consumer.inflight_key, "key", "value")

    run = start(lambda job: None)

    check_aborts(run, "Poller", 2, redis.ResponseError)
    assert active(direct, keys) == ids(jobs)  # the failed fetch lost nothing


@pytest.mark.parametrize("process", ["Scheduler", "Custodian", "Heartbeat"])
def test_run_aborts_if_a_maintenance_loop_cannot_poll_redis_after_its_max_attempts(
    backend: Backend,
    consumer: gq.Consumer,
    start: Callable[..., Started],
    direct: redis.Redis,
    keys: QueueKeys,
    process: str,
) -> None:
    # The Go suite's three cases "Aborts if the <process> process can't poll Redis after
    # <Process>MaxAttempts", one parameter each.
    prefix = process.lower()
    setattr(consumer.opts, f"{prefix}_max_attempts", 2)
    setattr(consumer.opts, f"{prefix}_max_backoff", 0.1)
    setattr(consumer.opts, f"{prefix}_poll_interval", 0.1)
    run = start(lambda job: None)
    wait_registered(direct, keys, consumer)

    backend.outage()

    check_aborts(run, process, 2, redis.ConnectionError)
