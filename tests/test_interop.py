"""gq against the real curlyq (SPEC 13): Go programs built from ../shared/go and gq, as
real processes on one redis-server that this module starts.

Timings: a gq consumer here runs with heartbeat 0.3 s and consumer timeout 1 s (below
gq's floors, as tests may), so it recovers a killed Go consumer's jobs in about a second.
curlyq enforces its own floors (heartbeat 15 s, consumer timeout 5 s), so its custodian
needs 20 s of silence before it recovers a killed gq worker's jobs: that test is marked
slow. In the mixed fleet both sides keep their defaults, as a real deployment would.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

import gq
from gq import job as jobs
from gq.store.keys import QueueKeys
from tests.cli_support import ADMIN, WORKER, env_for, run
from tests.helpers import RedisServer, wait_until
from tests.interop.fixtures import curlyq, direct, queue, server  # noqa: F401 - fixtures
from tests.interop.golang import Curlyq, GoConsumer, build
from tests.interop.inprocess import consuming

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = [sys.executable, "-m", "tests.fault_worker"]  # gq-worker without option floors
HANDLER = "tests.interop.handlers:record"


def idle(direct: redis.Redis, queue: str) -> bool:
    """Nothing left anywhere: no message, nothing ready, scheduled or in flight."""
    keys = QueueKeys(queue)
    inflight = [key for key in direct.zrange(keys.consumers, 0, -1) if direct.scard(key)]
    return not inflight and not any(
        direct.exists(key) for key in (keys.data, keys.active, keys.scheduled)
    )


def gq_worker(tmp_path: Path, server: RedisServer, queue: str, *args: str,
              launcher: list[str] = WORKER, **env: str) -> subprocess.Popen[bytes]:  # fmt: skip
    """A gq-worker process running tests.interop.handlers:record; output in a file."""
    environ = env_for(server.url, queue, handler_url=server.url, **env)
    with open(tmp_path / f"gq-worker-{uuid.uuid4().hex[:6]}.log", "wb") as log:
        return subprocess.Popen([*launcher, HANDLER, *args], cwd=ROOT, env=environ, stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip


def done_by_gq(direct: redis.Redis, queue: str) -> list[tuple[str, int, str]]:
    """What tests.interop.handlers:record ran: (id, attempt, data) per run."""
    return [tuple(json.loads(x)) for x in direct.lrange(f"{queue}:test:done", 0, -1)]


# --------------------------------------------------------------------------- setup


@pytest.mark.parametrize("required", ["1", ""])
def test_a_missing_go_tree_skips_or_fails_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, required: str
) -> None:
    monkeypatch.setenv("GQ_SHARED_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GQ_REQUIRE_INTEROP", required)
    expected = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(expected, match="curlyq source tree is missing"):
        build(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `go` on it
    with pytest.raises(expected, match="`go` is not installed"):
        build(tmp_path)


# --------------------------------------------------------------------------- produce


def test_go_produces_and_gq_consumes(curlyq: Curlyq, server: RedisServer, queue: str,
                                     direct: redis.Redis) -> None:  # fmt: skip
    now = curlyq.produce(queue, 20, "go")
    later = curlyq.produce(queue, 3, "go-later", after="1s")
    seen: dict[str, gq.Job] = {}
    with consuming(queue, server.url, lambda job: seen.setdefault(job.id, job)):
        wait_until(lambda: len(seen) == 23, 15, message="every Go job run by gq")
    assert {job_id: (job.data, job.attempt) for job_id, job in seen.items()} == {
        job_id: (job_id.encode(), 0) for job_id in now + later
    }
    assert idle(direct, queue)


def test_gq_produces_and_go_consumes(curlyq: Curlyq, server: RedisServer, queue: str,
                                     direct: redis.Redis, tmp_path: Path) -> None:  # fmt: skip
    producer = gq.Producer(queue, url=server.url)
    expected = {
        producer.perform(b"one"): (b"one", 0),
        producer.perform(gq.Job(id="given", data=b"\x00\xff", attempt=3)): (b"\x00\xff", 3),
        producer.perform_after(0.5, b"after"): (b"after", 0),
    }
    many = producer.perform_many([b"many-%d" % i for i in range(1500)])  # two script calls
    expected.update({job_id: (b"many-%d" % i, 0) for i, job_id in enumerate(many)})
    # curlyq decodes every message gq wrote (gq's extra ReadyAt key included).
    assert {k: (v["data"], v["attempt"]) for k, v in curlyq.dump(queue).items()} == expected
    go = curlyq.consumer(tmp_path, queue, "-concurrency", "20", "-buffer", "50",
                         "-scheduler-poll", "100ms")  # fmt: skip
    try:
        wait_until(lambda: len(go.records()) >= len(expected), 20, message="Go ran every job")
    finally:
        assert go.stop() == 0, go.log
    records = go.records()
    assert len(records) == len(expected)  # each once
    assert {r["id"]: (r["data"], r["attempt"]) for r in records} == expected
    assert idle(direct, queue)  # curlyq acknowledged them all
    producer.close()


# --------------------------------------------------------------------------- attempts


def test_a_job_failed_in_go_is_retried_by_gq_with_the_attempt_go_counted(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    gq.Producer(queue, url=server.url).perform(gq.Job(id="r1", data=b"retry me"))
    # Its scheduler idle (one poll an hour) so that it cannot run the retry itself before it
    # stops, which it did under load: gq's consumer below is to run it. The scheduler's one
    # pass is at its start, which a loaded CI host delayed past a 100 ms backoff (curlyq
    # writes the due time in whole seconds: often already due); at 2 s it is due 1-2 s on.
    go = curlyq.consumer(tmp_path, queue, "-fail-every", "1", "-max-backoff", "2s",
                         "-scheduler-poll", "1h")  # fmt: skip
    try:
        wait_until(lambda: direct.zscore(QueueKeys(queue).scheduled, "r1"), 15,
                   message="curlyq scheduled its retry")  # fmt: skip
    finally:
        assert go.stop() == 0, go.log
    assert [(r["id"], r["attempt"], r["failed"]) for r in go.records()] == [("r1", 0, True)]
    assert curlyq.dump(queue)["r1"]["attempt"] == 1
    seen: list[gq.Job] = []
    with consuming(queue, server.url, seen.append):
        wait_until(lambda: seen, 15, message="gq ran the job curlyq retried")
    assert [(job.id, job.data, job.attempt) for job in seen] == [("r1", b"retry me", 1)]
    assert idle(direct, queue)


def test_a_job_failed_in_gq_is_retried_by_go_with_the_attempt_gq_counted(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    curlyq.produce(queue, 1, "r2")

    def fail(job: gq.Job) -> None:
        raise RuntimeError("fails in gq")

    with consuming(queue, server.url, fail, job_max_backoff=0.1):
        wait_until(lambda: direct.zscore(QueueKeys(queue).scheduled, "r2-0"), 15,
                   message="gq scheduled its retry")  # fmt: skip
    assert curlyq.dump(queue)["r2-0"]["attempt"] == 1  # curlyq reads gq's updated message
    go = curlyq.consumer(tmp_path, queue, "-scheduler-poll", "100ms")
    try:
        wait_until(go.records, 15, message="curlyq ran the job gq retried")
    finally:
        assert go.stop() == 0, go.log
    assert [(r["id"], r["data"], r["attempt"]) for r in go.records()] == [("r2-0", b"r2-0", 1)]
    assert idle(direct, queue)


def test_a_job_curlyq_killed_is_in_gq_dead_list(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    # Attempt 1 with JobMaxAttempts 1: curlyq kills it at its first failure.
    gq.Producer(queue, url=server.url).perform(gq.Job(id="k1", data=b"doomed", attempt=1))
    go = curlyq.consumer(tmp_path, queue, "-fail-every", "1", "-max-attempts", "1")
    try:
        wait_until(lambda: direct.zscore(QueueKeys(queue).dead, "k1"), 15, message="k1 dead")
    finally:
        assert go.stop() == 0, go.log
    listed = run(ADMIN, "dead", "list", "--json", env=env_for(server.url, queue))
    assert listed.returncode == 0, listed.stderr
    [entry] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (entry["id"], entry["attempt"], entry["data"]) == ("k1", 2, "doomed")
    # ...and gq's tool can send it back to the queue, where gq runs it.
    retried = run(ADMIN, "dead", "retry", "--all", env=env_for(server.url, queue))
    assert retried.returncode == 0, retried.stderr
    seen: list[gq.Job] = []
    with consuming(queue, server.url, seen.append):
        wait_until(lambda: seen, 15, message="gq ran the job it took back from dead")
    assert [(job.id, job.data) for job in seen] == [("k1", b"doomed")]


def test_a_job_gq_killed_is_dead_for_curlyq(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis
) -> None:
    curlyq.produce(queue, 1, "k2")

    def fail(job: gq.Job) -> None:
        raise RuntimeError("fails in gq")

    with consuming(queue, server.url, fail, job_max_attempts=1, job_max_backoff=0.1):
        wait_until(lambda: direct.zscore(QueueKeys(queue).dead, "k2-0"), 15, message="dead")
    # curlyq keeps dead jobs in the same sorted set and decodes the message gq left there
    # (its extra Error key included), with the attempts gq counted.
    message = curlyq.dump(queue)["k2-0"]
    assert (message["data"], message["attempt"], message["msg_id"]) == (b"k2-0", 2, "k2-0")
    assert "fails in gq" in (jobs.decode_error(direct.hget(QueueKeys(queue).data, "k2-0")) or "")
    assert direct.llen(QueueKeys(queue).active) == 0


# --------------------------------------------------------------------------- crashes


def test_gq_recovers_the_jobs_of_a_sigkilled_go_consumer(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    ids = curlyq.produce(queue, 10, "held")
    go = curlyq.consumer(tmp_path, queue, "-concurrency", "5", "-buffer", "5", "-sleep", "1h")
    try:
        inflight_key = wait_until(lambda: _holding(direct, queue, 10), 15,
                                  message="the Go consumer holding all 10 jobs")  # fmt: skip
    finally:
        go.kill()
    assert direct.llen(QueueKeys(queue).active) == 0  # only a custodian can bring them back
    seen: list[gq.Job] = []
    with consuming(queue, server.url, seen.append):
        wait_until(lambda: len(seen) >= 10, 15, message="gq ran every job the Go consumer held")
    assert sorted((job.id, job.attempt) for job in seen) == sorted((i, 0) for i in ids)
    assert not direct.exists(inflight_key)
    assert direct.zscore(QueueKeys(queue).consumers, inflight_key) is None
    assert idle(direct, queue)


@pytest.mark.slow
def test_curlyq_recovers_the_jobs_of_a_sigkilled_gq_worker(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    ids = gq.Producer(queue, url=server.url).perform_many([b"sleep:3600"] * 10)
    worker = gq_worker(tmp_path, server, queue, "--concurrency", "5", "--buffer-size", "5",
                       "--heartbeat-poll-interval", "0.3", "--stats-interval", "0",
                       launcher=LAUNCHER)  # fmt: skip
    try:
        inflight_key = wait_until(lambda: _holding(direct, queue, 10), 20,
                                  message="the gq worker holding all 10 jobs")  # fmt: skip
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    # curlyq's floors: a consumer silent for heartbeat 15 s + timeout 5 s is dead.
    go = curlyq.consumer(tmp_path, queue, "-heartbeat", "15s", "-consumer-timeout", "5s",
                         "-custodian-poll", "250ms", "-concurrency", "10")  # fmt: skip
    try:
        wait_until(lambda: len(go.records()) >= 10, 40,
                   message="curlyq ran every job the gq worker held")  # fmt: skip
    finally:
        assert go.stop() == 0, go.log
    assert sorted((r["id"], r["attempt"]) for r in go.records()) == sorted((i, 0) for i in ids)
    assert not direct.exists(inflight_key)
    assert idle(direct, queue)


def _holding(direct: redis.Redis, queue: str, count: int) -> Any:
    """The in-flight key of the consumer that holds ``count`` jobs, if one does."""
    for key in direct.zrange(QueueKeys(queue).consumers, 0, -1):
        if direct.scard(key) == count:
            return key
    return None


# --------------------------------------------------------------------------- fleet


@pytest.mark.timeout(180)
def test_a_mixed_fleet_drains_5000_jobs_with_none_lost(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    # Both sides keep their default heartbeat and timeout, as in production; handlers take
    # 2 ms on both sides so that the two consumers share the work. curlyq fails every 50th
    # job it runs, and either side may run the retry: its attempt must show every failure.
    go = curlyq.consumer(tmp_path, queue, "-concurrency", "20", "-buffer", "20", "-sleep", "2ms",
                         "-fail-every", "50", "-max-backoff", "100ms",
                         "-scheduler-poll", "200ms")  # fmt: skip
    worker = gq_worker(tmp_path, server, queue, "--concurrency", "20", "--stats-interval", "0",
                       "--scheduler-poll-interval", "0.2", GQ_TEST_SLEEP="0.002")  # fmt: skip
    try:
        wait_until(lambda: direct.zcard(QueueKeys(queue).consumers) == 2, 20,
                   message="both consumers registered")  # fmt: skip
        ids = curlyq.produce(queue, 2500, "go")
        producer = gq.Producer(queue, url=server.url)
        for start in range(0, 2500, 500):
            ids += producer.perform_many([b"gq-%d" % i for i in range(start, start + 500)])
        producer.close()
        wait_until(lambda: len(_successes(go, direct, queue)) >= 5000, 120, 0.1,
                   "5,000 jobs done")  # fmt: skip
        assert wait_until(lambda: idle(direct, queue), 10, message="every job acknowledged")
    finally:
        assert go.stop() == 0, go.log
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
    done = _successes(go, direct, queue)
    runs = collections.Counter(job_id for job_id, _, _ in done)
    assert set(runs) == set(ids) and len(ids) == 5000  # none lost
    assert max(runs.values()) == 1  # and, with no crash, none done twice
    failures = collections.Counter(r["id"] for r in go.records() if r["failed"])
    assert failures and all(attempt == failures[job_id] for job_id, attempt, _ in done)
    by_gq = sum(1 for _, _, side in done if side == "gq")
    print(f"mixed fleet: curlyq did {len(done) - by_gq}, gq did {by_gq}, "
          f"curlyq failed {sum(failures.values())} runs")  # fmt: skip
    assert 0 < by_gq < len(done), by_gq


def _successes(go: GoConsumer, direct: redis.Redis, queue: str) -> list[tuple[str, int, str]]:
    """(id, attempt, "go" or "gq") of every successful run on either side."""
    done = [(str(r["id"]), int(r["attempt"]), "go") for r in go.records() if not r["failed"]]
    return done + [(job_id, attempt, "gq") for job_id, attempt, _ in done_by_gq(direct, queue)]
