"""Job ids that are not valid UTF-8 (issue 19, defect 9). curlyq writes them (a Go string
holds any bytes); gq keeps such an id exact from fetch to the last write, so the job is
acknowledged, retried or killed like any other and the worker lives on: in process on
fakeredis and a real Redis, and in a real gq-worker fed by curlyq's own producer."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import msgpack
import pytest
import redis

import gq
from gq import job as jobs
from gq.store.keys import QueueKeys
from tests.byte_id_handlers import raw_id, record_and_act
from tests.cli_support import ROOT, env_for
from tests.helpers import Backend, RedisServer, delete_keys, stop_process, wait_until
from tests.interop.golang import Curlyq, build

pytestmark = pytest.mark.timeout(120)

OK, RETRY, KILL = b"ok-\xff", b"retry-\xfe\xfe", b"kill-\xc3\x28"  # each one invalid UTF-8
FAST = ("--job-max-attempts", "1", "--job-max-backoff", "0.1", "--scheduler-poll-interval",
        "0.1", "--poller-poll-duration", "0.2")  # fmt: skip


def curlyq_message(job_id: bytes, data: bytes = b"") -> bytes:
    """A message as curlyq's Go encoder writes it: ID a MessagePack str of raw bytes."""
    head = b"\x83" + msgpack.packb("ID") + bytes([0xA0 + len(job_id)]) + job_id
    return head + msgpack.packb("Data") + msgpack.packb(data, use_bin_type=True) + (
        msgpack.packb("Attempt") + msgpack.packb(0)
    )


def runs(client: redis.Redis, queue: str) -> list[bytes]:
    return sorted(client.lrange(f"{queue}:test:runs", 0, -1))


def check_outcomes(client: redis.Redis, queue: str, ok: bytes, retry: bytes, kill: bytes) -> None:
    """ok ran once and is gone; retry failed once, then ran and is gone; kill failed twice
    and is dead, under its exact id, with its error."""
    keys = QueueKeys(queue)
    wait_until(lambda: client.zscore(keys.dead, kill) is not None, 20, message="kill is dead")
    wait_until(lambda: len(runs(client, queue)) == 5, 10)
    assert runs(client, queue) == sorted(
        [ok + b" 0", retry + b" 0", retry + b" 1", kill + b" 0", kill + b" 1"]
    )
    assert set(client.hkeys(keys.data)) == {kill}
    dead = jobs.decode(client.hget(keys.data, kill) or b"")
    assert raw_id(dead) == kill and jobs.decode_error(client.hget(keys.data, kill) or b"")


def test_an_id_that_is_not_utf8_round_trips_through_encode_and_decode() -> None:
    job = jobs.decode(curlyq_message(RETRY, b"d"))
    assert raw_id(job) == RETRY
    again = jobs.decode(jobs.encode(gq.Job(job.id, job.data, job.attempt + 1), error="e"))
    assert (raw_id(again), again.data, again.attempt) == (RETRY, b"d", 1)


@pytest.mark.timeout(60)
def test_a_consumer_acks_retries_and_kills_jobs_whose_ids_are_not_utf8(
    backend: Backend, start: Any
) -> None:
    direct, queue = backend.direct(), backend.queue
    keys = QueueKeys(queue)
    for job_id in (OK, RETRY, KILL):
        direct.hset(keys.data, job_id, curlyq_message(job_id))
        direct.rpush(keys.active, job_id)
    consumer, greenlet = start(lambda job: record_and_act(direct, queue, job),
                               job_max_attempts=1, job_max_backoff=0.1,
                               scheduler_poll_interval=0.1)  # fmt: skip
    check_outcomes(direct, queue, OK, RETRY, KILL)
    gq.Producer(queue, client=backend.client()).perform(gq.Job(id="ok-after"))
    wait_until(lambda: b"ok-after 0" in runs(direct, queue), 10)  # it lives on
    assert not greenlet.dead


@pytest.fixture(scope="module")
def curlyq(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Curlyq:
    address = f"{redis_server.host}:{redis_server.port}"
    return Curlyq(build(tmp_path_factory.mktemp("curlyq-bin")), address)


def go_produce(tools: Curlyq, queue: str, prefix: bytes) -> bytes:
    """One job enqueued by curlyq's real Producer, its id ``<prefix>-0`` in raw bytes."""
    command = [str(tools.bin / "producer"), "-addr", tools.addr, "-queue", queue, "-n", "1"]
    proc = subprocess.run([*command, "-prefix", prefix], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_gq_worker_survives_curlyq_jobs_whose_ids_are_not_utf8(
    redis_server: RedisServer, curlyq: Curlyq, tmp_path: Path
) -> None:
    if redis_server.db != 0 or redis_server.password:
        pytest.skip("curlyq's producer reaches only database 0 without a password")
    queue = f"test_byte_ids_{uuid.uuid4().hex[:8]}"
    client = redis_server.client()
    ids = [go_produce(curlyq, queue, prefix) for prefix in (b"ok\xff", b"retry\xfe", b"kill\xc3")]
    assert ids == [b"ok\xff-0", b"retry\xfe-0", b"kill\xc3-0"]
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "tests.fault_worker",
                                   "tests.byte_id_handlers:by_prefix", *FAST], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        check_outcomes(client, queue, *ids)
        gq.Producer(queue, client=client).perform(gq.Job(id="ok-after"))
        wait_until(lambda: b"ok-after 0" in runs(client, queue), 10)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text(errors="replace")
    finally:
        stop_process(worker)
        delete_keys(client, f"{queue}*")
