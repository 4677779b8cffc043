"""The dashboard on a real Redis Cluster: the registry lives in its own slot, each queue
in the slot of its hash tag, and every page and change still works."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from gq import dashboard
from tests.dashboard_support import Http, make_dead, serving, write_facts, write_history
from tests.queue_sides import BothSides
from tests.topologies import Cluster, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.timeout(120)
def test_pages_and_changes_on_a_cluster(cluster: Cluster) -> None:
    client = cluster.client()
    name = f"{{dash-{uuid.uuid4().hex[:6]}}}"
    client.sadd("gq:queues", name, "no-hash-tag")  # the second cannot be a queue here
    rq = BothSides(client, name)
    [job_id] = make_dead(rq, [(b"<b>x</b>", "e")])
    consumer = str(uuid.uuid4())
    rq.register(consumer)
    write_facts(client, name, consumer)
    minute = int(rq.server_time() // 60) * 60
    write_history(client, name, {minute: (7, 1)})
    with serving(dashboard.app(client=client)) as address:
        http = Http(address)
        index = http.get("/")
        assert index.status == 200 and f'data-queue="{name}"' in index.body
        assert 'data-queue="no-hash-tag"' not in index.body
        queue = json.loads(http.get(f"/api/queues/{name}").body)
        assert queue["dead"] == 1 and queue["consumers"][0]["facts"]["host"] == "worker-7"
        history = json.loads(http.get(f"/api/queues/{name}/history").body)["history"]
        assert history[-1] == {"minute": minute, "done": 7, "failed": 1, "retried": 0, "dead": 1}
        page = http.get(f"/queues/{name}/dead")
        assert "&lt;b&gt;x&lt;/b&gt;" in page.body
        reply = http.post(
            f"/queues/{name}/dead/retry", [("id", job_id), ("csrf_token", page.token)]
        )
        assert reply.status == 303
    assert client.lrange(rq.keys.active, 0, -1) == [job_id.encode()]
