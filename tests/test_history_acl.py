"""The history of finished jobs (issue 34) as the user of docs/deployment.md's ACL rule:
the scripts that end a job write its entry (and trim the history) and ``gq.Queue.history``
reads it with the commands the rule allows."""

from __future__ import annotations

import uuid

import pytest

import gq
from gq.store.connection import client_from_url
from gq.store.jobs import RedisQueue
from tests.queue_sides import BothSides
from tests.test_tls_acl import _life_user, server
from tests.topologies import Node

__all__ = ["server"]  # the fixture
pytestmark = pytest.mark.timeout(60)


def test_the_documented_rule_writes_and_reads_the_history(server: Node) -> None:
    queue = "{" + f"hist-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-history", queue)
    admin = server.client()
    client = client_from_url(url)
    try:
        q = gq.Queue(queue, client=client)
        q.history_settings(history_max=2)
        producer = gq.Producer(queue, client=client)
        ids = [producer.perform(gq.Job(data=f"job {i}".encode())) for i in range(4)]
        later = producer.perform_after(3600, gq.Job(data=b"later"))
        store = RedisQueue(client, queue)
        store.register("c1")
        taken = [job_id for job_id, _ in store.fetch("c1", 4)]
        assert store.ack("c1", taken[:1]) == [True]  # ack.lua
        assert store.fetch("c1", 0, acks=taken[1:2]).acked == [True]  # fetch.lua's acks
        assert store.kill("c1", taken[2], None, dead_max_jobs=10, dead_max_age=60)  # kill.lua
        assert q.cancel(later) == 1  # cancel.lua
        states = {e.id: e.state for e in q.history(limit=10).entries}
        assert states == {taken[2]: "dead", later: "cancelled"}  # trimmed to 2
        assert set(taken) == set(ids)
    finally:
        client.close()
        BothSides(admin, queue).delete_queue()
        admin.close()
