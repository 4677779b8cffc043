"""The busiest groups on the dashboard's queue page (SPEC section 17), over HTTP on a real
Redis: nothing for a queue without grouped jobs; with them, each busy group's jobs
waiting and held and the limits in force."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

import gq
from gq import dashboard
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue
from tests.dashboard_support import Http, registered_queue, serving
from tests.helpers import RedisServer
from tests.queue_sides import BothSides
from tests.test_dashboard_flow import path

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def client(redis_server: RedisServer) -> redis.Redis:
    return redis_server.client()


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_dash_groups") as queue:
        yield queue


@pytest.fixture
def http(client: redis.Redis) -> Iterator[Http]:
    with serving(dashboard.app(client=client)) as address:
        yield Http(address)


def _groups_section(body: str) -> str:
    start = body.index('<section class="groups"')
    return body[start : body.index("</section>", start)]


def test_the_queue_page_shows_the_busiest_groups(rq: BothSides, client: redis.Redis,
                                                 http: Http) -> None:  # fmt: skip
    assert 'class="groups"' not in http.get(path(rq)).body  # no grouped job: no panel
    queue = gq.Queue(rq.keys.name, client=client)
    queue.set_group_limits(concurrency=2)
    queue.set_group_limits(rate=(10, 1.0), group="tenant:big")
    entries = [(f"{g}-{i}", gq.job.encode(gq.Job(f"{g}-{i}")), 0.0, f"tenant:{g}")
               for g, n in (("big", 30), ("small", 2)) for i in range(n)]  # fmt: skip
    push_group(RedisQueue(client, rq.keys.name), "now", entries)
    section = _groups_section(http.get(path(rq)).body)
    assert "2 with jobs waiting" in section
    big = section[section.index('data-group="tenant:big"'):]
    big = big[: big.index("</tr>")]
    assert '<td class="num">30</td>' in big and "10 per 1s" in big
    assert '<td class="num">2</td>' in big
    assert section.index("tenant:big") < section.index("tenant:small")  # busiest first
