"""Job events as the user of docs/deployment.md's ACL rule: the scripts' XADD, the
switch and the readers run with the commands the rule allows."""

from __future__ import annotations

import uuid

import pytest

import gq
from gq.store.connection import client_from_url
from tests.queue_sides import BothSides
from tests.test_tls_acl import _life_user, server

__all__ = ["server"]  # the fixture
pytestmark = pytest.mark.timeout(60)


def test_the_documented_rule_writes_and_reads_events(server: object) -> None:
    queue = "{" + f"ev-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-events", queue)  # type: ignore[arg-type]
    admin = server.client()  # type: ignore[attr-defined]
    client = client_from_url(url)
    try:
        q = gq.Queue(queue, client=client)
        q.enable_events(maxlen=50)
        producer = gq.Producer(queue, client=client)
        job_id = producer.perform(b"x")
        assert q.cancel(job_id) == 1
        assert [e.event for e in q.events(since="0")] == ["enqueued", "cancelled"]
        assert list(q.events(since=None)) == []  # XREVRANGE, then XREAD
        following = q.events(since="0", block=1.0)  # XREAD ... BLOCK
        assert [next(following).event, next(following).event] == ["enqueued", "cancelled"]
        assert client.xlen(f"{queue}:events") == 2
        assert len(client.xrange(f"{queue}:events")) == 2
        q.disable_events()
    finally:
        client.close()
        BothSides(admin, queue).delete_queue()
        admin.delete(f"{queue}:events")
        admin.close()
