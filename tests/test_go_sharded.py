"""go/gqtask on a sharded queue, with real processes on a real redis-server (a sharded
queue's shards are hash-tagged keys, so one server holds them all): grouped and unique
Go tasks routed as gq routes them, their ids minted so that gq finds each by id alone,
and a Go ShardedProducer (go/gqtask/producer.go) that declares the layout as gq does and
follows a reshard (docs/deployment.md, "One queue over many masters")."""

# It imports the module-scoped fixtures of tests/interop/fixtures.py, which the tests then
# name as parameters (as pyproject's per-file ignores allow tests/test_interop_tasks.py).
# ruff: noqa: F811

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

import gq
from gq.store.keys import QueueKeys, sharded_key
from gq.store.shards import Layout, declare, descriptor, forget, layout
from gq.tasks.ids import id_time
from tests.cli_support import WORKER, env_for
from tests.helpers import RedisServer, stop_process, wait_until
from tests.interop.fixtures import curlyq, direct, queue, server  # noqa: F401 - fixtures
from tests.interop.golang import Curlyq
from tests.test_interop_tasks import APP, GO_ARGS, GO_KWARGS, ROOT, runs

pytestmark = [pytest.mark.timeout(120), pytest.mark.real_redis]


@pytest.fixture
def cleanup(direct: redis.Redis, queue: str) -> Iterator[None]:
    """Each shard's keys, the runs' list and the descriptor deleted after the test."""
    yield
    for key in [*direct.scan_iter(f"{{{queue}~*"), f"{queue}:ran"]:
        direct.delete(key)
    forget(direct, queue)


@contextmanager
def gq_worker(server: RedisServer, queue: str, tmp_path: Path) -> Iterator[None]:
    """A gq-worker naming the logical queue: it serves the shards the descriptor names."""
    env = env_for(server.url, None, GQ_TEST_TASK_QUEUE=queue)
    command = [*WORKER, APP, "--stats-interval", "0", "--poller-poll-duration", "1"]
    with open(tmp_path / "gq-worker.log", "ab") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        stop_process(proc)


def holders(direct: redis.Redis, job_id: str, *plans: Layout) -> list[str]:
    """The shards (of any of ``plans``) whose data hash holds ``job_id``."""
    shards = dict.fromkeys(q for plan in plans for q in plan.queues)
    return [s for s in shards if direct.hexists(QueueKeys(s).data, job_id)]


def ran_all(direct: redis.Redis, queue: str, ids: set[str]) -> bool:
    return ids <= {r["id"] for r in runs(direct, queue)}


def test_go_routes_grouped_and_unique_tasks_by_group_and_lock_and_gq_finds_them_by_id(
    curlyq: Curlyq,
    server: RedisServer,
    direct: redis.Redis,
    queue: str,
    tmp_path: Path,
    cleanup: None,
) -> None:
    app = gq.App(url=server.url, queue=queue, shards={queue: 3})
    plan = declare(direct, queue, 3)  # as gq's first producer of the queue does
    keys: dict[str, str] = {}  # job id -> its routing key
    for group in ("tenant:a", "tenant:b", "tenant:c", "tenant:d"):
        for _ in range(2):
            keys[send(curlyq, queue, "-group", group)] = group
    for order in ("order-1", "order-2", "order-3"):
        lock = f"deliver:key:{order}"  # gqtask.UniqueLock("deliver", order)
        keys[send(curlyq, queue, "-unique", lock)] = lock
    assert len({plan.for_key(key) for key in keys.values()}) > 1  # several shards
    for job_id, key in keys.items():
        # On its group's (lock's) shard only, its id minted to route there: a UUIDv7.
        assert holders(direct, job_id, plan) == [plan.for_key(key)] == [plan.for_id(job_id)]
        assert id_time(job_id) is not None and abs(id_time(job_id) - time.time()) < 60  # type: ignore[operator]
        assert app.result(job_id).queue == plan.for_key(key)
    # An id given by the caller is kept: the job goes to its group's shard all the same,
    # where gq finds it by asking every shard (as for gq's using(id=...)).
    given = next(f"go-grouped-{i}" for i in range(99)
                 if plan.for_id(f"go-grouped-{i}") != plan.for_key("tenant:a"))  # fmt: skip
    assert send(curlyq, queue, "-group", "tenant:a", "-id", given) == given
    assert holders(direct, given, plan) == [plan.for_key("tenant:a")]
    assert app.result(given).queue == plan.for_key("tenant:a")
    keys[given] = "tenant:a"
    with gq_worker(server, queue, tmp_path):
        wait_until(lambda: ran_all(direct, queue, set(keys)), 60,
                   message="the gq worker ran every Go job")  # fmt: skip
        wait_until(lambda: all(app.result(i).status() == "done" for i in keys), 30,
                   message="every Go job done, its result kept")  # fmt: skip
    for job_id, key in keys.items():
        assert app.result(job_id).queue == plan.for_key(key)  # its result, by id alone
    # deliver retries once (gq.Retry): a grouped job's retry stayed on its group's shard.
    assert sorted(r["attempt"] for r in runs(direct, queue) if r["id"] == given) == [0, 1]
    assert all((r["args"], r["kwargs"]) == (GO_ARGS, GO_KWARGS) for r in runs(direct, queue))


def send(curlyq: Curlyq, queue: str, *flags: str) -> str:
    """One deliver task through taskproducer's fixed Layout of 3 shards; its id."""
    return curlyq.produce_task(queue, "-shards", "3", "-result-ttl", "60s", *flags)[0]


def test_a_go_producer_declares_the_layout_and_follows_a_reshard_within_a_second(
    curlyq: Curlyq,
    server: RedisServer,
    direct: redis.Redis,
    queue: str,
    tmp_path: Path,
    cleanup: None,
) -> None:
    out = tmp_path / "follow.txt"
    with open(out, "wb") as sink:
        go = subprocess.Popen(
            [str(curlyq.bin / "taskproducer"), "-addr", curlyq.addr, "-queue", queue,
             "-shards", "3", "-follow", "-n", "150", "-every", "20ms"],
            stdout=sink, stderr=subprocess.PIPE,
        )  # fmt: skip

    def written() -> list[tuple[str, str, float]]:
        """Each job: its id, the shard Go wrote it to, when it was routed (unix s)."""
        lines = [line.split() for line in out.read_text().splitlines()]
        return [(i, shard, int(ms) / 1000) for i, shard, ms in lines]

    try:
        wait_until(lambda: len(written()) >= 30, 30, message="30 Go jobs before the reshard")
        # No gq producer declared the queue: Go did, with gq's fields.
        fields = {k.decode(): v.decode() for k, v in direct.hgetall(sharded_key(queue)).items()}
        assert fields == {"shards": "3", **descriptor(layout(queue, 3))}
        early = len(written())  # written before the reshard began: on the old layout
        gq.Queue(queue, url=server.url, shards=3).reshard(5)
        after = time.time()
        assert go.wait(60) == 0, go.stderr.read() if go.stderr else ""
    finally:
        stop_process(go)  # type: ignore[arg-type]
    old, new = layout(queue, 3), layout(queue, 5)
    jobs = written()
    assert len(jobs) == 150
    assert all(shard == old.for_id(job_id) for job_id, shard, _ in jobs[:early])
    for job_id, shard, routed in jobs:
        assert holders(direct, job_id, old, new) == [shard]  # where Go said it wrote it
        if routed > after + 1.0:  # its layout read after the reshard: the new one
            assert shard == new.for_id(job_id), (job_id, routed - after)
    late = [shard for _, shard, routed in jobs if routed > after + 1.0]
    assert len(late) >= 20 and set(late) - set(old.queues)  # some on shards only 5 have
    with gq_worker(server, queue, tmp_path):  # it serves both layouts while one drains
        wait_until(lambda: ran_all(direct, queue, {i for i, _, _ in jobs}), 60,
                   message="the gq worker ran every Go job of both layouts")  # fmt: skip


def test_a_go_producer_given_another_count_than_redis_holds_is_refused(
    curlyq: Curlyq, direct: redis.Redis, queue: str, cleanup: None
) -> None:
    declare(direct, queue, 3)
    proc = subprocess.run(
        [str(curlyq.bin / "taskproducer"), "-addr", curlyq.addr, "-queue", queue,
         "-shards", "4", "-follow", "-n", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert f'queue "{queue}" has 3 shards in Redis (gq:sharded:{queue}), not 4' in proc.stderr
    assert list(direct.scan_iter(f"{{{queue}~*")) == []  # nothing written
    assert direct.hget(sharded_key(queue), "shards") == b"3"
