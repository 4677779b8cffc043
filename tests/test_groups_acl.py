"""Groups (SPEC section 17) as the user of docs/deployment.md's ACL rule: every group
script (push_group, fetch from groups, a group limit, a group hold, a retry into the
group, a recovery, tidy, group_limits) runs with the commands the rule allows."""

from __future__ import annotations

import uuid

import pytest

import gq
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue
from tests.queue_sides import BothSides
from tests.test_tls_acl import _life_user, server
from tests.topologies import Node

__all__ = ["server"]  # the fixture
pytestmark = pytest.mark.timeout(60)


def test_the_documented_rule_runs_every_group_script(server: Node) -> None:
    queue = "{" + f"grp-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-groups", queue)
    admin = server.client()
    client = gq.store.connection.client_from_url(url)
    try:
        gq.Queue(queue, client=client).set_group_limits(concurrency=1)
        q = RedisQueue(client, queue)
        entries = [(f"a-{i}", gq.job.encode(gq.Job(f"a-{i}")), 0.0, "a") for i in range(3)]
        assert push_group(q, "now", entries) == [True] * 3
        q.register("c1")
        assert [i for i, _ in q.fetch("c1", 10)] == ["a-0"]
        assert q.fetch("c1", 10).state == "full"
        assert q.retry("c1", "a-0", gq.job.encode(gq.Job("a-0")), 0)
        assert q.enqueue_due(10) == 1  # back into its group
        q.register("dead")
        gq.Queue(queue, client=client).set_group_limits(concurrency=5)  # unparks the group
        assert sorted(i for i, _ in q.fetch("dead", 10)) == ["a-0", "a-1", "a-2"]
        moved = q.recover("c1", [q.keys.inflight("dead")], timeout=-1, max_jobs=10,
                          max_recoveries=5, dead_max_jobs=10, dead_max_age=60)  # fmt: skip
        assert moved == 3
        q.tidy("0", dead_max_jobs=10, dead_max_age=60)
        assert sorted(i for i, _ in q.fetch("c1", 10)) == ["a-0", "a-1", "a-2"]
        message = gq.job.encode(gq.Job("a-0"))
        assert q.retry("c1", "a-0", message, 30, hold=30, group_hold=True)
        push_group(q, "now", [("a-9", gq.job.encode(gq.Job("a-9")), 0.0, "a")])
        assert list(q.fetch("c1", 10)) == []  # its group is held
        (row,) = gq.Queue(queue, client=client).groups()["busiest"]
        assert row["group"] == "a" and row["waiting"] == 1 and row["held_back_seconds"] > 20
    finally:
        client.close()
        BothSides(admin, queue).delete_queue()
        admin.close()
