"""Search and the bulk actions by filter (issue 34) as the user of docs/deployment.md's ACL
rule: every read and every script they send (purge, move, reschedule, dead retry and
delete, a search of every state) runs with the commands the rule allows."""

from __future__ import annotations

import uuid

import pytest

import gq
from gq.jobfilter import JobFilter
from gq.store.connection import client_from_url
from tests.bulk_support import Jobs
from tests.queue_sides import BothSides
from tests.test_tls_acl import _life_user, server
from tests.topologies import Node

__all__ = ["server"]  # the fixture
pytestmark = pytest.mark.timeout(60)


def test_the_documented_rule_runs_every_search_and_bulk_action(server: Node) -> None:
    queue = "{" + f"ops-{uuid.uuid4().hex[:6]}" + "}"
    target = queue + "-new"  # the same hash tag: the rule's ~{ops-...}* covers it
    url = _life_user(server, "gq-ops", queue)
    admin = server.client()
    client = client_from_url(url)
    try:
        w = Jobs(client, queue)
        q = gq.Queue(queue, client=client)
        ready = [w.ready("app.t", i, tenant="acme") for i in range(3)]
        w.q.register("c1")
        assert [i for i, _ in w.q.fetch("c1", 1)] == ready[:1]
        w.grouped("app.t", "acme", 9)
        w.scheduled("app.t", at=4e9)
        w.dead("app.t", error="timeout")
        assert len(q.jobs(JobFilter(args=(("tenant", "acme"),))).jobs) == 3  # one running
        assert q.reschedule(JobFilter(task="app.t"), after=60).done == 1
        assert q.retry_dead(JobFilter(error="timeout")).done == 1
        assert q.purge(JobFilter(group="acme")).done == 1
        assert q.move(JobFilter(task="app.t"), to=target).done == 4  # 2 ready, 1 retried, 1 due
        assert q.delete_dead(JobFilter(task="app.t")).done == 0
        assert gq.Queue(target, client=client).stats()["ready"] == 3
    finally:
        client.close()
        for name in (queue, target):
            BothSides(admin, name).delete_queue()
        admin.close()
