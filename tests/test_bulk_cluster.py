"""Search and bulk actions by filter (issue 34) on a real Redis Cluster started by this
module: every script declares its keys (a key outside them would be refused), a move to a
queue of the same hash tag is one script per batch, and a move to a queue on another
master copies then deletes; `gq move` does the same as a user runs it."""

from __future__ import annotations

import uuid

import pytest
from redis.crc import key_slot

import gq
from gq.jobfilter import JobFilter
from gq.store import bulk
from gq.store.connection import client_from_url
from gq.store.groupkeys import group_keys
from tests.bulk_support import Jobs
from tests.cli_support import ADMIN, env_for, run
from tests.queue_sides import BothSides
from tests.topologies import Cluster, module_cluster, tags_on_each_master

pytestmark = [pytest.mark.timeout(120), pytest.mark.real_redis]


cluster = module_cluster  # (a fixture: a Cluster of 3 masters for this module)


def test_bulk_actions_run_on_a_cluster_in_one_slot_and_across_slots(cluster: Cluster) -> None:
    here, far = tags_on_each_master(cluster, f"ops-{uuid.uuid4().hex[:6]}")[:2]
    near = here + "-new"  # the same hash tag: the same slot
    assert key_slot(f"{here}:data".encode()) != key_slot(f"{far}:data".encode())
    client = client_from_url(cluster.url)
    w, q = Jobs(client, here), gq.Queue(here, client=client)
    try:
        ready = [w.ready("app.t", i, tenant="acme") for i in range(600)]
        w.grouped("app.t", "acme", 1)
        died = w.dead("app.t", error="timeout", died=100.0)
        locked = w.ready("app.u", opts={"unique": "L"})
        client.set(f"{here}:unique:L", locked)
        assert len(q.jobs(JobFilter(args=(("tenant", "acme"),)), limit=1000).jobs) == 600
        assert q.purge(JobFilter(task="app.u")).done == 1 and client.get(f"{here}:unique:L") is None
        assert bulk.same_slot(q.store, near) and not bulk.same_slot(q.store, far)
        assert q.move(JobFilter(args=(("tenant", "acme"),)), to=near).done == 600
        assert Jobs(client, near).active() == ready
        moved = gq.Queue(near, client=client).move(JobFilter(task="app.t"), to=far)
        assert moved.done == 600 and Jobs(client, far).active() == ready
        result = run(ADMIN, "move", "--to", far, "--yes", env=env_for(cluster.url, here))
        assert (result.returncode, result.stdout.strip()) == (0, "moved 2 job(s)"), result.stderr
        assert gq.Queue(far, client=client).stats()["grouped"] == 1
        assert client.zscore(f"{far}:dead", died) == 100.0
        assert q.stats()["ready"] + q.stats()["dead"] + q.stats()["grouped"] == 0
    finally:
        for name in (here, near, far):
            BothSides(client, name).delete_queue()
            for key in group_keys(name):
                client.delete(key)
        client.close()
