"""Queue names holding "/" or "%" through the real gevent WSGI server (issue #15, defect 14):
the server decodes %2F before routing, so "x/pause" answered 405 and "x/dead" showed queue
"x"'s dead page. The dashboard's links escape such names so that routing is exact."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest
import redis

import gq
from gq import dashboard
from tests.dashboard_support import Http, serving
from tests.helpers import Backend

REGISTRY = "gq:queues"
NAMES = ["x", "x/pause", "x/dead", "x/dead/retry", "a/b/c", "100%/x", "x%2Fy", "x/"]


def title(body: str) -> str:
    match = re.search(r'class="name"[^>]*>(.*?)<', body, re.S)
    assert match, body[:500]
    return html.unescape(match.group(1)).strip()


def link(body: str, name: str) -> str:
    """The href the queues page links ``name`` with (the dashboard's own escaping)."""
    for href, text in re.findall(r'<a href="([^"]+)">([^<]*)</a>', body):
        if html.unescape(text) == name:
            return html.unescape(href)
    raise AssertionError(f"no link for {name!r}")


@pytest.fixture
def site(backend: Backend) -> Iterator[tuple[Http, redis.Redis]]:
    client = backend.client()
    names = [f"{backend.queue}{name}" for name in NAMES]
    client.sadd(REGISTRY, *names)
    for name in names:
        gq.Producer(name, client=client).perform(name.encode())
    try:
        with serving(dashboard.app(client=client)) as address:
            yield Http(address), client
    finally:
        client.srem(REGISTRY, *names)


@pytest.mark.parametrize("suffix", NAMES)
def test_every_page_of_a_queue_named_with_slashes_is_that_queues(
    site: tuple[Http, redis.Redis], backend: Backend, suffix: str
) -> None:
    http, _ = site
    name = backend.queue + suffix
    base = link(http.get("/").body, name)
    for page in ("", "/dead", "/scheduled", "/consumers"):
        reply = http.get(base + page)
        assert reply.status == 200, (name, page, reply.status)
        assert title(reply.body) == name, (page, reply.body[:300])
    api = base.replace("/queues/", "/api/queues/", 1)
    assert json.loads(http.get(api).body)["name"] == name
    assert json.loads(http.get(api + "/consumers").body) == {"consumers": []}


@pytest.mark.parametrize("suffix", ["x/pause", "x/dead", "x"])
def test_pausing_a_queue_named_with_slashes_pauses_that_queue_only(
    site: tuple[Http, redis.Redis], backend: Backend, suffix: str
) -> None:
    http, client = site
    name = backend.queue + suffix
    base = link(http.get("/").body, name)
    page = http.get(base)
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.body)[1])
    assert action == base + "/pause"
    reply = http.post(action, [("csrf_token", page.token)])
    assert reply.status == 303, reply.body[:300]
    assert reply.headers["Location"] == base + "?done=paused"
    paused = {n: gq.Queue(backend.queue + n, client=client).paused for n in NAMES}
    assert paused == {n: n == suffix for n in NAMES}
