"""gq-worker running a gq.App (real processes): the app's queues, --queue, --retries,
--processes, periodic entries and a task module that fails to import."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import gq
from tests.cli_support import WORKER, Worker, env_for, log_lines, run
from tests.helpers import RedisServer, delete_keys, wait_until


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"cli_tasks_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def env(server: RedisServer, queue: str, **extra: str) -> dict[str, str]:
    return env_for(server.url, None, GQ_TEST_TASK_QUEUE=queue, **extra)


def producer_app(server: RedisServer, queue: str) -> gq.App:
    """The test's own copy of tests/task_app.py's tasks (the same names and queues)."""
    app = gq.App(url=server.url, queue=queue)
    app.task(name="hello")(lambda name: None)
    app.task(name="other", queue=f"{queue}-b")(lambda n: None)
    app.task(name="fails")(lambda: None)
    return app


def ran(client: redis.Redis, queue: str) -> list[str]:
    return sorted(item.decode() for item in client.lrange(f"{queue}:ran", 0, -1))


def test_an_app_serves_every_queue_its_tasks_name(redis_server: RedisServer, queue: str) -> None:
    app = producer_app(redis_server, queue)
    app.tasks["hello"].enqueue("ann")
    app.tasks["other"].enqueue(7)
    gq.Producer(f"{queue}-b", url=redis_server.url).perform(b"legacy")
    result = run(WORKER, "tests.task_app:app", "--burst", "--stats-interval", "0",
                 env=env(redis_server, queue))  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = log_lines(result.stderr)
    assert any(f"queue={queue},{queue}-b" in line for line in lines), lines
    assert ran(redis_server.client(), queue) == [f"hello ann {queue} 0", "other 7", "raw legacy"]


def test_burst_drains_grouped_jobs_waiting_in_their_groups_lines_then_exits(
    redis_server: RedisServer, queue: str
) -> None:
    """Grouped jobs wait in their group's line, not the active list: burst counts them."""
    app = producer_app(redis_server, queue)
    for tenant in ("acme", "initech"):
        for n in range(3):
            app.tasks["hello"].using(group=tenant).enqueue(f"{tenant}{n}")
    client = redis_server.client()
    assert client.llen(f"{queue}:active") == 0  # all six in their groups' lines
    result = run(WORKER, "tests.task_app:app", "--burst", "--stats-interval", "0",
                 env=env(redis_server, queue))  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = [f"hello {t}{n} {queue} 0" for t in ("acme", "initech") for n in range(3)]
    assert ran(client, queue) == sorted(expected)
    assert client.hlen(f"{queue}:groups:lines") == 0


def test_queue_flag_chooses_the_queues(redis_server: RedisServer, queue: str) -> None:
    app = producer_app(redis_server, queue)
    app.tasks["hello"].enqueue("ann")
    app.tasks["other"].enqueue(7)
    result = run(WORKER, "tests.task_app:app", "--burst", "--queue", f"{queue}-b",
                 env=env(redis_server, queue))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ran(redis_server.client(), queue) == ["other 7"]
    assert redis_server.client().llen(f"{queue}:active") == 1  # hello still waits


def test_retries_flag_counts_runs_after_the_first(redis_server: RedisServer, queue: str) -> None:
    app = producer_app(redis_server, queue)
    job = app.tasks["fails"].enqueue()
    result = run(WORKER, "tests.task_app:app", "--burst", "--retries", "2",
                 "--job-max-backoff", "0.01", "--scheduler-poll-interval", "0.1",
                 env=env(redis_server, queue))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ran(redis_server.client(), queue) == ["fails"] * 3
    assert redis_server.client().zscore(f"{queue}:dead", job.id) is not None


def test_retries_and_job_max_attempts_must_agree(redis_server: RedisServer, queue: str) -> None:
    result = run(WORKER, "tests.task_app:app", "--retries", "2", "--job-max-attempts", "5",
                 env=env(redis_server, queue))  # fmt: skip
    assert result.returncode == 2
    assert "--retries 2 and --job-max-attempts 5 disagree" in result.stderr


def test_a_task_module_that_fails_to_import_exits_2_with_the_reason(
    redis_server: RedisServer, queue: str
) -> None:
    for extra in ([], ["--processes", "2"]):
        result = run(WORKER, "tests.task_app_broken:app", *extra, env=env(redis_server, queue))
        assert result.returncode == 2, result
        assert "RuntimeError: the task module is broken on purpose" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_processes_run_an_app(redis_server: RedisServer, queue: str) -> None:
    app = producer_app(redis_server, queue)
    app.tasks["hello"].enqueue_many([(f"p{i}",) for i in range(20)])
    result = run(WORKER, "tests.task_app:app", "--burst", "--processes", "2",
                 env=env(redis_server, queue), timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(ran(redis_server.client(), queue)) == 20


def test_periodic_entries_of_the_app_are_enqueued(
    redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    worker = Worker(tmp_path, "tests.task_app:app", "--scheduler-poll-interval", "0.1",
                    env=env(redis_server, queue, GQ_TEST_TASK_PERIODIC="1"))  # fmt: skip
    try:
        wait_until(lambda: any("tick" in r for r in ran(redis_server.client(), queue)),
                   timeout=15)  # fmt: skip
    finally:
        worker.stop()
