"""The history of finished jobs (issue 34) on a real Redis Cluster started by this module:
its keys share the queue's hash tag, so the scripts that end a job (ack, the acks on a
fetch, kill, cancel) declare them and Redis runs them in the queue's slot; the history is
read back from there."""

from __future__ import annotations

import uuid

import pytest
from redis.crc import key_slot

import gq
from gq.store.connection import client_from_url
from gq.store.jobs import RedisQueue
from tests.queue_sides import BothSides
from tests.topologies import Cluster, module_cluster, tags_on_each_master

pytestmark = [pytest.mark.timeout(120), pytest.mark.real_redis]


cluster = module_cluster  # (a fixture: a Cluster of 3 masters for this module)


def test_the_history_is_written_and_read_in_the_queue_s_slot(cluster: Cluster) -> None:
    queue = tags_on_each_master(cluster, f"hist-{uuid.uuid4().hex[:6]}")[0]
    client = client_from_url(cluster.url)
    store = RedisQueue(client, queue)
    k = store.keys
    assert key_slot(k.finished.encode()) == key_slot(k.data.encode())
    assert key_slot(k.finished_settings.encode()) == key_slot(k.data.encode())
    try:
        producer = gq.Producer(queue, client=client)
        ids = [producer.perform(gq.Job(data=f"job {i}".encode())) for i in range(3)]
        later = producer.perform_after(3600, gq.Job(data=b"later"))
        store.register("c1")
        taken = [job_id for job_id, _ in store.fetch("c1", 3)]
        assert sorted(taken) == sorted(ids)
        assert store.ack("c1", taken[:1]) == [True]
        assert store.fetch("c1", 0, acks=taken[1:2]).acked == [True]
        assert store.kill("c1", taken[2], None, dead_max_jobs=10, dead_max_age=60)
        q = gq.Queue(queue, client=client)
        assert q.cancel(later) == 1
        states = {e.id: e.state for e in q.history(limit=10).entries}
        assert states == {taken[0]: "done", taken[1]: "done", taken[2]: "dead", later: "cancelled"}
    finally:
        BothSides(client, queue).delete_queue()
        client.delete(k.finished, k.finished_settings)
        client.close()
