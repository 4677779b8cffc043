"""gq tasks across languages (SPEC 14 and 18): go/gqtask on the real curlyq and a gq-worker
running a gq.App, as real processes on one redis-server that this module starts.

Go enqueues tasks that Python runs (arguments, types, headers and options intact), gq
enqueues a task that a Go consumer with gqtask.Router runs, and a retry by either side
leaves the envelope as the other wrote it. The Go unit tests of gqtask run here too.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import redis

import gq
from gq import job as jobs
from gq.store.keys import QueueKeys
from tests.cli_support import WORKER, env_for
from tests.helpers import RedisServer, stop_process, wait_until
from tests.interop.fixtures import curlyq, direct, queue, server  # noqa: F401 - fixtures
from tests.interop.golang import GQTASK, Curlyq, go_env

pytestmark = [pytest.mark.timeout(120), pytest.mark.real_redis]

ROOT = Path(__file__).resolve().parent.parent
APP = "tests.interop.task_app:app"
WHEN = dt.datetime(2026, 12, 1, 12, 0, 0, 500000, tzinfo=dt.timezone.utc)
# What taskproducer's "deliver" carries (tests/interop/go/taskproducer).
PAYLOAD = {"event": "paid", "items": [1, 2.5, None, True], "nested": {"deep": {"x": "y"}}}
GO_ARGS = ["https://example.com/hook", PAYLOAD]
GO_KWARGS = {"tenant": "acme", "blob": b"\x00\x01\xff", "when": WHEN}
TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


@pytest.fixture
def worker(tmp_path: Path, server: RedisServer, queue: str) -> Iterator[None]:
    """A gq-worker running tests/interop/task_app.py on ``queue``."""
    env = env_for(server.url, None, GQ_TEST_TASK_QUEUE=queue)
    with open(tmp_path / "gq-worker.log", "wb") as log:
        command = [*WORKER, APP, "--stats-interval", "0", "--scheduler-poll-interval", "0.2"]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        stop_process(proc)


def runs(direct: redis.Redis, queue: str) -> list[dict[str, Any]]:
    """What tests/interop/task_app.py's tasks recorded, in order."""
    return [msgpack.unpackb(raw, raw=False, timestamp=3)
            for raw in direct.lrange(f"{queue}:ran", 0, -1)]  # fmt: skip


def dead(direct: redis.Redis, queue: str, job_id: str) -> str | None:
    """The error of a dead job (None while it is not dead)."""
    keys = QueueKeys(queue)
    if direct.zscore(keys.dead, job_id) is None:
        return None
    return jobs.decode_error(direct.hget(keys.data, job_id)) or ""  # type: ignore[arg-type]


def test_go_unit_tests_of_gqtask(tmp_path: Path) -> None:
    go, env = go_env(tmp_path)
    proc = subprocess.run([go, "test", "-count=1", "./"], cwd=tmp_path / "src" / "gqtask",
                          env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok"), proc.stdout
    assert (tmp_path / "src" / "gqtask").resolve() == GQTASK


def test_go_enqueues_tasks_a_python_worker_runs_with_their_options(
    curlyq: Curlyq, direct: redis.Redis, queue: str, worker: None
) -> None:
    deliver, sent = curlyq.produce_task(queue, "-task", "deliver")
    fails, _ = curlyq.produce_task(queue, "-task", "always_fails", "-retries", "1")
    sleeps, _ = curlyq.produce_task(queue, "-task", "sleeps", "-retries", "0", "-timeout", "500ms")
    expired, _ = curlyq.produce_task(queue, "-task", "never_runs", "-expired")
    wait_until(lambda: all(dead(direct, queue, i) is not None for i in (fails, sleeps, expired))
               and len([r for r in runs(direct, queue) if r["id"] == deliver]) == 2, 30,
               message="every Go task run or dead")  # fmt: skip
    done = runs(direct, queue)
    # deliver: arguments, types and headers as Go wrote them, on the first run and on the
    # run after gq's own retry (gq.Retry) of the Go job.
    assert [(r["attempt"], r["args"], r["kwargs"], r["headers"])
            for r in done if r["id"] == deliver] == [
        (0, GO_ARGS, GO_KWARGS, TRACE), (1, GO_ARGS, GO_KWARGS, TRACE)]  # fmt: skip
    assert wait_until(lambda: not direct.hexists(QueueKeys(queue).data, deliver), 10)
    # Go's opts beat the app's defaults (retries=5, no timeout): 2 runs, 1 run, none.
    attempts = {i: [r["attempt"] for r in done if r["id"] == i] for i in (fails, sleeps, expired)}
    assert attempts == {fails: [0, 1], sleeps: [0], expired: []}
    assert "always" in (dead(direct, queue, fails) or "")
    assert "Timeout" in (dead(direct, queue, sleeps) or "")
    assert dead(direct, queue, expired) == "expired"
    assert sent.startswith(b"\x00gqt")


def test_the_job_events_of_a_go_task_name_its_task(
    curlyq: Curlyq, server: RedisServer, queue: str, worker: None
) -> None:
    """The events' Lua reads the task's name from the envelope's first key: gqtask writes
    "task" first, as gq does (it once sorted the keys, and every Go job's events said "")."""
    events_of = gq.Queue(queue, server.url)
    events_of.enable_events()
    deliver, _ = curlyq.produce_task(queue, "-task", "deliver")
    seen = lambda: [e for e in events_of.events("0") if e.job_id == deliver]  # noqa: E731
    wait_until(lambda: any(e.event == "done" for e in seen()), 30, message="deliver done")
    assert [(e.event, e.task) for e in seen()] == [
        ("started", "deliver"), ("retried", "deliver"), ("started", "deliver"),
        ("done", "deliver")]  # fmt: skip


def test_gq_enqueues_a_task_a_go_router_runs_and_a_go_retry_keeps_it(
    curlyq: Curlyq, server: RedisServer, direct: redis.Redis, queue: str, tmp_path: Path
) -> None:
    app = gq.App(url=server.url, queue=queue)

    @app.task(name="deliver", retries=3, timeout=30)
    def deliver(url: str, payload: dict[str, Any], *, tenant: str, blob: bytes,
                when: dt.datetime) -> None: ...  # fmt: skip

    result = deliver.using(headers=TRACE).enqueue(*GO_ARGS, **GO_KWARGS)  # type: ignore[arg-type]
    written = jobs.decode(direct.hget(QueueKeys(queue).data, result.id)).data  # type: ignore[arg-type]
    go = curlyq.task_consumer(tmp_path, queue, "-tasks", "deliver", "-fail-attempts", "1",
                              "-max-backoff", "100ms", "-scheduler-poll", "100ms")  # fmt: skip
    try:
        wait_until(lambda: len(go.records()) >= 2, 30, message="Go ran the task twice")
        wait_until(lambda: not direct.hexists(QueueKeys(queue).data, result.id), 10,
                   message="curlyq acknowledged it")  # fmt: skip
    finally:
        assert go.stop() == 0, go.log
    records = go.records()
    assert [r["attempt"] for r in records] == [0, 1]
    for r in records:  # the first run and the run after curlyq's retry see the same call
        assert (r["id"], r["task"], r["data"]) == (result.id, "deliver", written)
        assert (r["args"], r["kwargs"]) == (tagged(GO_ARGS), tagged(GO_KWARGS))
        assert (r["headers"], r["retries"], r["timeout"]) == (TRACE, 3, 30.0)


def test_a_task_unknown_to_the_go_router_is_retried_and_python_runs_it_intact(
    curlyq: Curlyq,
    direct: redis.Redis,
    queue: str,
    tmp_path: Path,
    server: RedisServer,
    worker_later: Any,
) -> None:
    job_id, sent = curlyq.produce_task(queue, "-task", "deliver")
    # Its scheduler idle (one poll an hour): under load it ran the retry itself (attempt 2)
    # before it stopped, and the gq worker below is to run it.
    go = curlyq.task_consumer(tmp_path, queue, "-tasks", "other", "-max-backoff", "100ms",
                              "-scheduler-poll", "1h")  # fmt: skip
    try:
        wait_until(
            lambda: direct.zscore(QueueKeys(queue).scheduled, job_id),
            15,
            message="curlyq scheduled the retry of a task its router does not know",
        )
    finally:
        assert go.stop() == 0, go.log
    assert go.records() == []  # no handler ran
    message = curlyq.dump(queue)[job_id]
    assert (message["data"], message["attempt"]) == (sent, 1)
    worker_later()
    wait_until(lambda: len(runs(direct, queue)) >= 1, 30, message="gq ran the retried Go task")
    [first, *_] = runs(direct, queue)
    assert (first["id"], first["attempt"], first["args"], first["kwargs"], first["headers"]) == (
        job_id, 1, GO_ARGS, GO_KWARGS, TRACE)  # fmt: skip


@pytest.fixture
def worker_later(request: pytest.FixtureRequest) -> Any:
    """Start the ``worker`` fixture when called (after a Go consumer had its turn)."""
    return lambda: request.getfixturevalue("worker")


def tagged(value: Any) -> Any:
    """A value as taskconsumer writes it, marked with the Go type it decoded to."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return {"$int": value}
    if isinstance(value, float):
        return {"$float": value}
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, dt.datetime):
        return {"$time": value.isoformat().replace("+00:00", "Z")}
    if isinstance(value, list):
        return [tagged(item) for item in value]
    return {key: tagged(item) for key, item in value.items()}


def test_go_enqueues_to_a_sharded_queue_s_shards_and_a_gq_worker_runs_every_job(
    curlyq: Curlyq, server: RedisServer, direct: redis.Redis, queue: str, tmp_path: Path
) -> None:
    """go/gqtask's Layout (shards.go) writes each job where gq routes its id; a gq-worker
    naming the logical queue serves every shard (the descriptor gq declared)."""
    from gq.store.shards import declare, forget

    plan = declare(direct, queue, 3)  # as gq's first producer or app of the queue does
    try:
        sent = [curlyq.produce_task(queue, "-task", "deliver", "-shards", "3")[0]
                for _ in range(12)]  # fmt: skip
        given = curlyq.produce_task(queue, "-task", "deliver", "-shards", "3", "-id", "go-7")[0]
        for job_id in [*sent, given]:
            holders = [s for s in plan.queues if direct.hexists(QueueKeys(s).data, job_id)]
            assert holders == [plan.for_id(job_id)], job_id
        assert len({plan.for_id(job_id) for job_id in sent}) > 1  # spread, not one shard
        env = env_for(server.url, None, GQ_TEST_TASK_QUEUE=queue)
        with open(tmp_path / "gq-worker.log", "wb") as log:
            command = [*WORKER, APP, "--stats-interval", "0", "--poller-poll-duration", "1"]
            proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wanted = {*sent, given}
            wait_until(lambda: wanted <= {r["id"] for r in runs(direct, queue)}, 30,
                       message="the gq worker ran every Go job")  # fmt: skip
        finally:
            stop_process(proc)
        assert all((r["args"], r["kwargs"]) == (GO_ARGS, GO_KWARGS)
                   for r in runs(direct, queue))  # fmt: skip
    finally:
        for shard in plan.queues:
            for key in direct.scan_iter(f"{shard}*"):
                direct.delete(key)
        forget(direct, queue)
