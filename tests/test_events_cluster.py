"""Job events on a real Redis Cluster: the stream shares the queue's hash tag, and the
scripts that write it declare it (a key outside them would be refused)."""

from __future__ import annotations

import uuid

import gevent
import pytest
from redis.crc import key_slot

import gq
from gq.store.connection import client_from_url
from gq.store.keys import QueueKeys
from tests.helpers import wait_until
from tests.queue_sides import BothSides
from tests.topologies import Cluster, module_cluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.real_redis]


cluster = module_cluster  # (a fixture: a Cluster of 3 masters for this module)


def test_a_worker_on_a_cluster_writes_the_events_of_its_jobs(cluster: Cluster) -> None:
    queue = "{" + f"ev-{uuid.uuid4().hex[:6]}" + "}"
    keys = QueueKeys(queue)
    assert key_slot(keys.events.encode()) == key_slot(keys.data.encode())
    client = client_from_url(cluster.url)
    q = gq.Queue(queue, client=client)
    q.enable_events()
    ids = gq.Producer(queue, client=client).perform_many([b"a", b"b", b"c"])
    consumer = gq.Consumer(queue, client=client_from_url(cluster.url))
    running = gevent.spawn(consumer.run, lambda job: None)
    try:
        wait_until(lambda: sum(e.event == "done" for e in q.events(since="0")) == 3, 30)
    finally:
        consumer.stop()
        running.join(10)
    assert running.exception is None
    events = list(q.events(since="0"))
    for job_id in ids:
        assert [e.event for e in events if e.job_id == job_id] == ["enqueued", "started", "done"]
    BothSides(client, queue).delete_queue()
    client.delete(keys.events)
    client.close()
