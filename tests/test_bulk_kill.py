"""A ``gq move`` or ``gq purge`` killed with SIGKILL half way through 20,000 jobs: every job
is where it was or where it was sent, never neither, and running the command again
completes it (issue 34). Real processes on a real Redis."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import redis

from gq import job as jobs
from gq.tasks import envelope
from tests.cli_support import ADMIN, ROOT, env_for, run
from tests.helpers import RedisServer, delete_keys, wait_until

pytestmark = pytest.mark.timeout(180)
JOBS = 20_000


@pytest.fixture
def names(redis_server: RedisServer) -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:8]
    source, target = f"{{kill-{tag}}}", f"{{kill-{tag}}}-new"
    yield source, target
    for name in (source, target):
        delete_keys(redis_server.client(), f"{name}*")


def fill(client: redis.Redis, queue: str) -> list[str]:
    ids = [f"job-{i:05d}" for i in range(JOBS)]
    data = envelope.encode("app.t", [1], {})
    pipe = client.pipeline(transaction=False)
    for i in range(0, JOBS, 1000):
        chunk = ids[i : i + 1000]
        pipe.hset(f"{queue}:data", mapping={j: jobs.encode(jobs.Job(j, data)) for j in chunk})
        pipe.rpush(f"{queue}:active", *chunk)
    pipe.execute()
    return ids


def listed(client: redis.Redis, queue: str) -> list[str]:
    return [i.decode() for i in client.lrange(f"{queue}:active", 0, -1)]


def kill_when(proc: subprocess.Popen[bytes], partly: object) -> None:
    """SIGKILL ``proc`` as soon as ``partly()`` holds (the work half done)."""
    try:
        wait_until(partly, timeout=60, interval=0.002, message="the command to be half way")
    finally:
        proc.kill()
        proc.wait()


def test_a_move_killed_half_way_leaves_each_job_in_one_queue_and_completes(
    redis_server: RedisServer, names: tuple[str, str]
) -> None:
    client = redis_server.client()
    source, target = names
    ids = fill(client, source)
    env = env_for(redis_server.url, source)
    proc = subprocess.Popen([*ADMIN, "move", "--to", target, "--task", "app.t"], cwd=ROOT, env=env)
    kill_when(proc, lambda: 0 < client.llen(f"{target}:active") < JOBS // 2)
    here, there = listed(client, source), listed(client, target)
    assert 0 < len(there) < JOBS  # killed half way
    assert sorted(here + there) == ids  # each exactly once: one script per page
    assert client.hlen(f"{source}:data") == len(here) and client.hlen(f"{target}:data") == len(
        there
    )
    done = run(ADMIN, "move", "--to", target, "--task", "app.t", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert listed(client, target) == ids and listed(client, source) == []


def test_a_move_across_slots_killed_half_way_loses_nothing_and_completes(
    redis_server: RedisServer, names: tuple[str, str]
) -> None:
    client = redis_server.client()
    source, target = names
    ids = fill(client, source)
    mover = [sys.executable, "-m", "tests.bulk_mover", redis_server.url, source, target]
    proc = subprocess.Popen(mover, cwd=ROOT, stdout=subprocess.DEVNULL)
    kill_when(proc, lambda: 0 < client.llen(f"{target}:active") < JOBS // 2)
    here, there = set(listed(client, source)), listed(client, target)
    assert 0 < len(there) < JOBS
    assert here | set(there) == set(ids)  # in the source, the target or both: never neither
    assert len(there) == len(set(there))
    for job_id in here & set(there):  # copied, not yet deleted: the same job in both
        assert client.hget(f"{source}:data", job_id) == client.hget(f"{target}:data", job_id)
    done = subprocess.run(mover, cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert listed(client, target) == ids and listed(client, source) == []
    assert client.hlen(f"{source}:data") == 0


def test_a_purge_killed_half_way_leaves_no_job_half_removed(
    redis_server: RedisServer, names: tuple[str, str]
) -> None:
    client = redis_server.client()
    source, _ = names
    ids = fill(client, source)
    env = env_for(redis_server.url, source)
    proc = subprocess.Popen([*ADMIN, "purge", "--task", "app.t"], cwd=ROOT, env=env)
    kill_when(proc, lambda: JOBS // 2 < client.llen(f"{source}:active") < JOBS)
    left = listed(client, source)
    assert 0 < len(left) < JOBS and left == ids[: len(left)]  # the tail went first
    stored = {k.decode() for k in client.hkeys(f"{source}:data")}
    assert stored == set(left)  # a job is whole (listed with its message) or gone
    done = run(ADMIN, "purge", "--task", "app.t", env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"purged {len(left)} job(s)"
    assert client.llen(f"{source}:active") == 0 and client.hlen(f"{source}:data") == 0
