"""gq-worker as a user runs it: a subprocess against a real redis-server (SPEC section 7)."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gq
from gq.options import ConsumerOptions
from tests.cli_support import (
    PATCH_WARNING,
    WORKER,
    Worker,
    closed_port_url,
    env_for,
    log_lines,
    run,
    start_password_server,
)
from tests.helpers import RealBackend, RedisServer, delete_keys, stop_process, wait_until
from tests.queue_sides import BothSides

# Fast maintenance loops so that a short test sees scheduled jobs move.
FAST = ("--scheduler-poll-interval", "0.1", "--poller-poll-duration", "1")


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_cli_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Any]:
    """``workers(*args, env=...)`` starts a gq-worker subprocess; all are stopped at teardown."""
    started: list[Worker] = []

    def start(*args: str, env: dict[str, str]) -> Worker:
        started.append(Worker(tmp_path, *args, env=env))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def rq(redis_server: RedisServer, queue: str) -> BothSides:
    return BothSides(redis_server.client(), queue)


def env(server: RedisServer, queue: str) -> dict[str, str]:
    return env_for(server.url, queue, handler_url=server.url)


def recorded(rq: BothSides, what: str = "done") -> list[str]:
    """Ids the test handlers recorded as ``done`` or ``started``, in order, repeats kept."""
    return [i.decode() for i in rq.client.lrange(f"{rq.keys.name}:test:{what}", 0, -1)]


def enqueue(rq: BothSides, n: int, data: bytes = b"") -> list[str]:
    return gq.Producer(rq.keys.name, client=rq.client).perform_many([data] * n)


# -- usage: --help and exit code 2 ---------------------------------------------------------


def test_help_documents_every_option_with_its_default_and_the_exit_codes() -> None:
    result = run(WORKER, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for name in ConsumerOptions.names():
        assert f"--{name.replace('_', '-')}" in text
    for short in (
        "--concurrency",
        "--buffer-size",
        "--grace-period",
        "--queue",
        "--url",
        "--job-timeout",
        "--burst",
        "--log-level",
        "--log-format",
    ):
        assert short in text
    assert text.count("Default") >= len(ConsumerOptions.names())
    for code in ("0 clean stop", "1 fatal error", "2 bad usage", "3 Redis unreachable"):
        assert code in text


@pytest.mark.parametrize(
    "args, reason",
    [
        (["tests.handlers:record", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["tests.handlers:record", "--concurrency", "many"], "invalid int value"),
        (["tests.handlers:record", "--job-timeout", "soon"], "invalid duration"),
        (
            ["tests.handlers:record", "--concurrency", "0"],
            "processor_concurrency must be at least 1",
        ),
        (["no_such_module_xyz:handle"], "cannot import handler module 'no_such_module_xyz'"),
        (["tests.handlers:no_such_function"], "has no attribute 'no_such_function'"),
        (["tests.handlers:NOT_CALLABLE"], "is not callable (it is int)"),
        (["tests.handlers"], "HANDLER must be package.module:function"),
    ],
)
def test_bad_usage_exits_2_with_one_line_and_no_traceback(
    redis_server: RedisServer, queue: str, args: list[str], reason: str
) -> None:
    result = run(WORKER, *args, env=env(redis_server, queue))
    assert result.returncode == 2, result.stderr
    assert reason in result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in log_lines(result.stderr) if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, result.stderr


def test_no_queue_exits_2(redis_server: RedisServer) -> None:
    result = run(WORKER, "tests.handlers:record", env=env_for(redis_server.url, None))
    assert result.returncode == 2
    assert "no queue: pass --queue NAME or set GQ_QUEUE" in result.stderr


# -- exit code 3 and credentials -------------------------------------------------------------


def test_unreachable_redis_exits_3(queue: str) -> None:
    url = closed_port_url()
    result = run(WORKER, "tests.handlers:record", "--url", url, "--queue", queue)
    assert result.returncode == 3, result.stderr
    assert f"cannot use Redis at {url}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def password_server(tmp_path: Path) -> Iterator[RedisServer]:
    proc, server = start_password_server(tmp_path, "s3cr3t-pw-" + uuid.uuid4().hex[:6])
    yield server
    stop_process(proc)


def test_wrong_or_missing_password_exits_3_without_printing_it(
    password_server: RedisServer, queue: str
) -> None:
    wrong = RedisServer(
        password_server.host, password_server.port, password="wrong-" + uuid.uuid4().hex[:6]
    )
    for server in (wrong, RedisServer(password_server.host, password_server.port)):
        result = run(WORKER, "tests.handlers:record", "--url", server.url, "--queue", queue)
        assert result.returncode == 3, result.stderr
        assert "cannot use Redis at" in result.stderr
        for secret in (password_server.password, wrong.password):
            assert secret not in result.stdout + result.stderr


def test_the_password_never_appears_in_a_run(password_server: RedisServer, queue: str) -> None:
    rq = BothSides(password_server.client(), queue)
    enqueue(rq, 3)
    env = env_for(password_server.url, queue, handler_url=password_server.url)
    result = run(
        WORKER,
        "tests.handlers:record",
        "--burst",
        "--log-level",
        "debug",
        "--stats-interval",
        "0.05",
        *FAST,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert len(recorded(rq)) == 3
    assert password_server.password not in result.stdout + result.stderr
    assert f"url=redis://:***@{password_server.host}:{password_server.port}/0" in result.stderr


# -- burst -------------------------------------------------------------------------------------


def test_burst_runs_ready_and_due_jobs_then_exits_0(
    redis_server: RedisServer, queue: str, rq: BothSides
) -> None:
    producer = gq.Producer(queue, client=rq.client)
    ids = enqueue(rq, 40, b"0.01")
    ids.append(producer.perform_at(1.0, b""))  # long due: the scheduler must move it first
    later = producer.perform_after(3600, b"")  # not due: does not hold the run
    result = run(
        WORKER,
        "tests.handlers:record",
        "--burst",
        "--concurrency",
        "7",
        "--buffer-size",
        "5",
        *FAST,
        env=env(redis_server, queue),
    )
    assert result.returncode == 0, result.stderr
    assert sorted(recorded(rq)) == sorted(ids)
    assert rq.counts() == {"ready": 0, "scheduled": 1, "due": 0, "dead": 0}
    assert rq.scheduled_jobs(10)[0][0] == later
    assert rq.consumers() == []  # deregistered after a clean stop
    start = next(line for line in result.stderr.splitlines() if "starting:" in line)
    for field in (
        f"queue={queue}",
        "consumer=",
        "concurrency=7",
        "buffer=5",
        "pid=",
        f"url={redis_server.url}",
    ):
        assert field in start


def test_burst_on_an_empty_queue_exits_0_at_once(redis_server: RedisServer, queue: str) -> None:
    result = run(
        WORKER, "tests.handlers:record", "--burst", env=env(redis_server, queue), timeout=10
    )
    assert result.returncode == 0, result.stderr
    assert "burst: nothing ready, due or in flight" in result.stderr


def test_env_gives_url_and_queue_and_fakeredis_url_runs_embedded() -> None:
    result = run(
        WORKER, "tests.handlers:record", "--burst", env=env_for("fakeredis://", "from_env")
    )
    assert result.returncode == 0, result.stderr
    assert "queue=from_env" in result.stderr and "url=fakeredis://" in result.stderr


def test_json_log_format_writes_one_object_a_line(redis_server: RedisServer, queue: str) -> None:
    result = run(
        WORKER,
        "tests.handlers:record",
        "--burst",
        "--log-format",
        "json",
        env=env(redis_server, queue),
    )
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in log_lines(result.stderr)]
    assert {"time", "level", "logger", "message", "pid"} <= set(entries[0])
    assert any("starting:" in entry["message"] for entry in entries)


def test_patching_comes_before_every_other_import() -> None:
    result = run(WORKER, "--version")
    assert result.returncode == 0
    assert PATCH_WARNING not in result.stderr


# -- signals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_first_signal_stops_gracefully_nothing_lost_nothing_duplicated(
    redis_server: RedisServer, queue: str, rq: BothSides, workers: Any, signum: int
) -> None:
    ids = enqueue(rq, 200, b"0.1")  # 10 at once: 100 jobs/s, 2 s in all
    worker = workers(
        "tests.handlers:record",
        "--concurrency",
        "10",
        "--buffer-size",
        "20",
        "--stats-interval",
        "0.2",
        *FAST,
        env=env(redis_server, queue),
    )
    worker.wait_for_output(" jobs/s")  # the periodic line, after 0.2 s
    wait_until(lambda: len(recorded(rq)) >= 20, 15, message="20 jobs done")
    worker.signal(signum)
    assert worker.wait() == 0, worker.output
    done, started = recorded(rq), recorded(rq, "started")
    assert len(done) < len(ids), "stopped too late to test anything"
    assert len(set(done)) == len(done)  # nothing ran twice
    assert sorted(started) == sorted(done)  # every started job finished
    ready = [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)]
    assert sorted(done + ready) == sorted(ids)  # the buffer went back: nothing lost
    assert rq.consumers() == []
    assert "gave back" in worker.output
    report = next(line for line in worker.output.splitlines() if " jobs/s" in line)
    for field in ("done=", "failed=0", "retried=0", "killed=0", "rate="):
        assert field in report

    result = run(
        WORKER,
        "tests.handlers:record",
        "--burst",
        "--concurrency",
        "50",
        env=env(redis_server, queue),
    )
    assert result.returncode == 0, result.stderr
    assert sorted(recorded(rq)) == sorted(ids)  # each job exactly once in all


def test_second_signal_stops_now_exit_1_running_jobs_stay_in_flight(
    redis_server: RedisServer, queue: str, rq: BothSides, workers: Any
) -> None:
    ids = enqueue(rq, 6)
    worker = workers(
        "tests.handlers:hang",
        "--concurrency",
        "4",
        "--buffer-size",
        "2",
        *FAST,
        env=env(redis_server, queue),
    )
    wait_until(lambda: len(recorded(rq, "started")) == 4, 15, message="4 handlers running")
    worker.signal(signal.SIGTERM)
    # The graceful stop gives the 2 buffered jobs back, then waits for the 4 (no grace limit).
    wait_until(lambda: rq.client.llen(rq.keys.active) == 2, 10, message="buffer given back")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 1, worker.output
    started = recorded(rq, "started")
    [(consumer, _, in_flight)] = rq.consumers()
    assert in_flight == 4  # left for another consumer's custodian
    assert sorted(rq.client.smembers(rq.keys.inflight(consumer))) == sorted(
        i.encode() for i in started
    )
    ready = [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)]
    assert sorted(started + ready) == sorted(ids)
    assert "second signal" in worker.output


def test_grace_period_running_out_exits_1(
    redis_server: RedisServer, queue: str, rq: BothSides, workers: Any
) -> None:
    enqueue(rq, 2)
    worker = workers(
        "tests.handlers:hang", "--grace-period", "0.3", *FAST, env=env(redis_server, queue)
    )
    wait_until(lambda: len(recorded(rq, "started")) == 2, 15, message="2 handlers running")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 1, worker.output
    assert "grace period" in worker.output
    assert rq.consumers()[0][2] == 2


# -- a fatal error while running ---------------------------------------------------------------


def test_losing_redis_while_running_exits_1(
    redis_server: RedisServer, queue: str, workers: Any
) -> None:
    backend = RealBackend(redis_server)
    backend.queue = queue
    try:
        worker = workers(
            "tests.handlers:record",
            "--poller-max-attempts",
            "1",
            *FAST,
            env=env_for(backend.url, queue, handler_url=redis_server.url),
        )
        worker.wait_for_output("started (concurrency=")
        backend.outage()
        assert worker.wait() == 1, worker.output
        assert "Poller failed 1 times in a row" in worker.output
    finally:
        backend.close()


# -- issue 19: handlers that are not plain functions ---------------------------------------


def test_an_async_def_handler_runs(redis_server: RedisServer, queue: str,
                                   rq: BothSides) -> None:  # fmt: skip
    ids = enqueue(rq, 2)
    result = run(WORKER, "tests.handlers:async_record", "--burst", env=env(redis_server, queue))
    assert result.returncode == 0, result.stderr
    assert rq.counts()["ready"] == 0 and sorted(recorded(rq)) == sorted(ids)  # awaited


def test_a_handler_raising_greenlet_exit_is_retried_and_the_worker_runs_on(
    redis_server: RedisServer, queue: str, rq: BothSides, workers: Any
) -> None:
    ids = enqueue(rq, 3)
    worker = workers("tests.handlers:greenlet_exit_first", "--concurrency", "1",
                     "--job-max-backoff", "0.2", *FAST, env=env(redis_server, queue))  # fmt: skip
    # One handler worker: had the first GreenletExit killed it, nothing would run again.
    wait_until(lambda: sorted(recorded(rq)) == sorted(ids), 30)
    assert sorted(recorded(rq, "started")) == sorted(ids * 2)  # each retried once, then done
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output


def test_gq_worker_runs_100_handlers_at_once_unless_told_and_a_consumer_keeps_5(
    redis_server: RedisServer, queue: str
) -> None:
    result = run(WORKER, "tests.handlers:record", "--burst", *FAST, env=env(redis_server, queue))
    assert result.returncode == 0, result.stderr
    start = next(line for line in result.stderr.splitlines() if "starting:" in line)
    assert "concurrency=100" in start, start
    help_text = " ".join(run(WORKER, "--help").stdout.split())
    assert "Default 100 (a gq.Consumer built in code: 5" in help_text
    consumer = gq.Consumer(queue, client=redis_server.client())
    assert consumer.opts.processor_concurrency == 5  # curlyq's, for code that builds one
