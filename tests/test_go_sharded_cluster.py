"""go/gqtask's ShardedProducer on a real Redis Cluster of 3 masters (tests/topologies.py):
the shards of a sharded queue are on different masters, and Go writes each job on its
shard's master (go/gqtask/cluster.go), where a gq-worker over the Cluster runs it
(docs/deployment.md, "One queue over many masters")."""

# It imports the fixtures cluster (a Cluster of its own for this module: module scope),
# client and name of tests/test_shards.py, which the tests then name as parameters (as
# tests/test_go_sharded.py does with the interop fixtures).
# ruff: noqa: F811

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gq
from gq.store.keys import QueueKeys, sharded_key
from gq.store.shards import descriptor, layout
from tests.helpers import wait_until
from tests.interop.golang import build, go_env
from tests.test_go_sharded import gq_worker, holders, ran_all
from tests.test_interop_tasks import GO_ARGS, GO_KWARGS, runs
from tests.test_shards import client, cluster, name  # noqa: F401 - fixtures
from tests.topologies import Cluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.real_redis]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go test programs (tests/interop/go), taskproducer among them."""
    return build(tmp_path_factory.mktemp("curlyq-bin"))


@pytest.fixture
def queue(client: Any, name: str) -> Iterator[str]:
    """A new sharded queue's name (its shards' keys and descriptor deleted after, by
    tests/test_shards.py's fixture) and the list of its runs (deleted after)."""
    yield name
    client.delete(f"{name}:ran")


def nodes(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{node.port}" for node in cluster.nodes)


def go_follow(
    programs: Path, cluster: Cluster, queue: str, n: int, *flags: str
) -> list[tuple[str, str]]:
    """``n`` deliver tasks written by taskproducer's ShardedProducer on the Cluster: each
    job's id and the shard Go wrote it to."""
    command = [str(programs / "taskproducer"), "-cluster", nodes(cluster), "-queue", queue,
               "-shards", "3", "-follow", "-n", str(n), "-result-ttl", "60s", *flags]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [(job_id, shard) for job_id, shard, _ in map(str.split, proc.stdout.splitlines())]


def masters_of(cluster: Cluster, shards: list[str]) -> dict[str, int]:
    """Each shard's master (its port): the one whose slots (CLUSTER SLOTS) hold the slot
    of the shard's keys (CLUSTER KEYSLOT)."""
    ranges = cluster.masters()
    with cluster.nodes[0].client() as node:
        slots = {s: int(node.execute_command("CLUSTER KEYSLOT", QueueKeys(s).data)) for s in shards}
    return {s: next(p for p, (low, high) in ranges.items() if low <= slots[s] <= high)
            for s in shards}  # fmt: skip


def test_go_writes_each_shard_on_its_master_and_a_gq_worker_over_the_cluster_runs_every_job(
    cluster: Cluster, programs: Path, client: Any, queue: str, tmp_path: Path
) -> None:
    plan = layout(queue, 3)
    owners = masters_of(cluster, plan.queues)
    assert len(set(owners.values())) == 3  # the 3 shards are on 3 masters
    written = dict(go_follow(programs, cluster, queue, 9))  # routed by id; Go declares
    fields = {k.decode(): v.decode() for k, v in client.hgetall(sharded_key(queue)).items()}
    assert fields == {"shards": "3", **descriptor(plan)}
    keys = {job_id: job_id for job_id in written}  # job id -> its routing key
    # A group routing to each shard, so that every master gets grouped jobs.
    groups = [next(g for g in (f"tenant:{i}" for i in range(99)) if plan.for_key(g) == shard)
              for shard in plan.queues]  # fmt: skip
    for group in groups:
        for job_id, shard in go_follow(programs, cluster, queue, 3, "-group", group):
            written[job_id], keys[job_id] = shard, group
    assert len(written) == 18
    for job_id, shard in written.items():
        # On the shard gq routes it to, held by that shard's master, a grouped job's id
        # minted to route there too.
        assert holders(client, job_id, plan) == [shard] == [plan.for_key(keys[job_id])]
        assert plan.for_id(job_id) == shard
        with cluster.node(owners[shard]).client() as master:
            assert master.hexists(QueueKeys(shard).data, job_id)
    assert set(written.values()) == set(plan.queues)
    app = gq.App(client=client, queue=queue, shards={queue: 3})
    with gq_worker(cluster.url, queue, tmp_path):
        wait_until(lambda: ran_all(client, queue, set(written)), 90,
                   message="the gq worker ran every Go job")  # fmt: skip
        wait_until(lambda: all(app.result(i).status() == "done" for i in written), 30,
                   message="every Go job done, found by its id alone")  # fmt: skip
    assert all(app.result(i).queue == shard for i, shard in written.items())
    ran = runs(client, queue)
    assert all((r["args"], r["kwargs"]) == (GO_ARGS, GO_KWARGS) for r in ran)
    attempts: dict[str, list[int]] = {}
    for run in ran:
        attempts.setdefault(run["id"], []).append(run["attempt"])
    assert attempts == {job_id: [0, 1] for job_id in written}  # deliver retries once


def test_go_reads_a_stale_slot_map_again_after_a_moved(cluster: Cluster, tmp_path: Path) -> None:
    """go/gqtask's TestAStaleSlotMapIsReadAgainAfterAMoved, which needs a Cluster: given
    a map with every slot on one master, a ShardedProducer's writes to the other masters'
    shards get MOVED; it reads the map once again and writes each on its master."""
    go, env = go_env(tmp_path)
    env["GQTASK_TEST_CLUSTER"] = nodes(cluster)
    name = "TestAStaleSlotMapIsReadAgainAfterAMoved"
    proc = subprocess.run([go, "test", "-count=1", "-v", "-run", f"^{name}$", "./"],
                          cwd=tmp_path / "src" / "gqtask", env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"--- PASS: {name}" in proc.stdout, proc.stdout  # ran, not skipped
