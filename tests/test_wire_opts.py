"""Every option of an envelope is checked before its task runs (docs/wire.md, "opts"): a
value of the wrong type or range, written by another language or a buggy producer, sends
the job to dead at once with a reason naming the option; the worker keeps running, holds
nothing in flight, and runs the good jobs after it (issue 31, defect 1)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq.errors import ConfigurationError
from gq.tasks import envelope
from gq.tasks.options import TaskOptions
from tests.cli_support import WORKER, env_for, log_lines, run
from tests.helpers import Backend, RedisServer, delete_keys, wait_until
from tests.task_support import dead, make_app, push_raw, run_app, stored

__all__ = ["run_app"]  # the fixture

_STEP = {"kind": "step", "queue": "q", "id": "s1", "task": "ping"}
_MEMBER = {"kind": "member", "queue": "q", "group": "g1", "index": 0, "keep": 60.0}

#: (opts, the option the reason names)
MALFORMED: list[tuple[dict[str, Any], str]] = [
    ({"then": 5}, "then"),
    ({"then": [5]}, "then[0]"),
    ({"then": [{"kind": "step"}]}, "then[0].queue"),
    ({"then": [{**_STEP, "args": "x"}]}, "then[0].args"),
    ({"then": [{**_STEP, "opts": 3}]}, "then[0].opts"),
    ({"then": [{"kind": "member", "queue": "q"}]}, "then[0].group"),
    ({"then": [{**_MEMBER, "index": "0"}]}, "then[0].index"),
    ({"then": [{**_MEMBER, "keep": math.inf}]}, "then[0].keep"),
    ({"result_ttl": math.inf}, "result_ttl"),
    ({"result_ttl": 1e300}, "result_ttl"),
    ({"result_ttl": math.nan}, "result_ttl"),
    ({"result_ttl": -5}, "result_ttl"),
    ({"result_ttl": "60"}, "result_ttl"),
    ({"retries": -1}, "retries"),
    ({"retries": 1.5}, "retries"),
    ({"retries": True}, "retries"),
    ({"timeout": "30"}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"timeout": 0}, "timeout"),
    ({"backoff": math.nan}, "backoff"),
    ({"backoff": [1]}, "backoff"),
    ({"expires": "soon"}, "expires"),
    ({"expires": math.nan}, "expires"),
    ({"unique": 5}, "unique"),
    ({"group": 5}, "group"),
    ({"group": ""}, "group"),
    ({"gather": 5}, "gather"),
    ({"gather": {"queue": "q", "group": "g"}}, "gather.n"),
]


@pytest.mark.parametrize(("opts", "option"), MALFORMED, ids=[repr(o) for o, _ in MALFORMED])
def test_a_malformed_option_sends_the_job_to_dead_before_it_runs(
    backend: Backend, run_app: Any, opts: dict[str, Any], option: str
) -> None:
    app = make_app(backend)
    runs: list[str] = []

    @app.task(name="ping")
    def ping(label: str) -> str:
        runs.append(label)
        return label

    bad = push_raw(backend, envelope.encode("ping", ["bad"], {}, opts), job_id="bad-1")
    good = ping.enqueue("good")
    consumer = run_app(app, job_max_attempts=5)
    wait_until(lambda: bad in dead(backend) and stored(backend, good.id) is None)
    assert f"option {option} is " in (dead(backend)[bad] or "")
    assert stored(backend, bad).attempt == 1  # type: ignore[union-attr]  # at once: no retry
    assert runs == ["good"]  # the bad job never ran; the worker went on
    assert backend.direct().smembers(f"{backend.queue}:inflight:{consumer.id}") == set()


def test_a_malformed_step_inside_a_good_envelope_is_checked_only_when_it_runs(
    backend: Backend, run_app: Any
) -> None:
    """A step's own opts are its envelope's when it runs: the first job, well formed, runs."""
    app = make_app(backend)
    runs: list[str] = []

    @app.task(name="ping")
    def ping(label: str) -> str:
        runs.append(label)
        return label

    step = {**_STEP, "queue": backend.queue, "opts": {"result_ttl": math.inf}}
    first = push_raw(backend, envelope.encode("ping", ["a"], {}, {"then": [step]}), "first")
    run_app(app)
    wait_until(lambda: "s1" in dead(backend))
    assert stored(backend, first) is None
    assert runs == ["a"]
    assert "option result_ttl is inf" in (dead(backend)["s1"] or "")


@pytest.mark.parametrize("name", ["result_ttl", "timeout", "backoff", "unique_for", "expires"])
def test_a_task_s_own_durations_are_bounded_as_an_envelope_s(name: str) -> None:
    """The own-call fast path trusts a task's own options: they meet the same bounds."""
    with pytest.raises(ConfigurationError, match=name):
        TaskOptions(**{name: 1e300})
    with pytest.raises(ConfigurationError, match=name):
        TaskOptions(**{name: math.inf})


# -- a real gq-worker process -----------------------------------------------------------------


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"wire_opts_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.mark.real_redis
def test_a_worker_process_survives_malformed_options_and_drains_the_good_jobs(
    redis_server: RedisServer, queue: str
) -> None:
    producer = gq.Producer(queue, url=redis_server.url)
    bad = {"then-5": {"then": 5}, "ttl-huge": {"result_ttl": 1e300},
           "step-bare": {"then": [{"kind": "step"}]}}  # fmt: skip
    for job_id, opts in bad.items():
        producer.perform(gq.Job(job_id, envelope.encode("hello", ["bad"], {}, opts)))
    for n in range(3):
        producer.perform(gq.Job(f"good-{n}", envelope.encode("hello", [f"g{n}"], {})))
    result = run(WORKER, "tests.task_app:app", "--burst", "--stats-interval", "0",
                 env=env_for(redis_server.url, None, GQ_TEST_TASK_QUEUE=queue))  # fmt: skip
    assert result.returncode == 0, result.stderr
    log_lines(result.stderr)
    client = redis_server.client()
    ran = sorted(item.decode() for item in client.lrange(f"{queue}:ran", 0, -1))
    assert ran == [f"hello g{n} {queue} 0" for n in range(3)]
    for job_id in bad:
        assert client.zscore(f"{queue}:dead", job_id) is not None, job_id
    assert not [k for k in client.scan_iter(match=f"{queue}:inflight:*") if client.scard(k)]
    assert client.llen(f"{queue}:active") == 0


@pytest.mark.parametrize("after", [math.inf, math.nan, -1.0, 1e300, "soon", True])
def test_retry_refuses_a_delay_that_is_not_a_finite_number_of_seconds(after: Any) -> None:
    """Retry(after=inf) would park its job for ever: never run again, never dead."""
    with pytest.raises(ValueError, match=r"Retry\(after=...\)"):
        gq.Retry(after=after)
    assert gq.Retry(after=0).after == 0.0 and gq.Retry(after=2).after == 2.0


def test_an_outcome_that_cannot_be_built_sends_the_job_to_dead_not_the_worker_down(
    backend: Backend, run_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last guard (gq/worker/planned.py): should a checked envelope's outcome still
    fail to build after its run, the job goes to dead with the reason, and the worker on."""
    from gq.tasks import outcome

    def broken(self: Any, value: Any) -> Any:
        raise RuntimeError("a bug in the outcome")

    monkeypatch.setattr(outcome.Finisher, "done", broken)
    app = make_app(backend)
    runs: list[str] = []

    @app.task(name="ping")
    def ping(label: str) -> str:
        runs.append(label)
        return label

    kept = ping.using(result_ttl=60, retries=2).enqueue("kept")
    plain = ping.enqueue("plain")
    run_app(app, job_max_attempts=5)
    wait_until(lambda: kept.id in dead(backend) and stored(backend, plain.id) is None)
    assert "its outcome could not be built: RuntimeError" in (dead(backend)[kept.id] or "")
    assert sorted(runs) == ["kept", "plain"]
