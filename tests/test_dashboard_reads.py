"""The reads the dashboard adds to the Redis boundary, on fakeredis and a real Redis, and
the dashboard's small pure parts (tokens, auth, chart scale, data display)."""

from __future__ import annotations

import base64
import json

import pytest

import gq
from gq.dashboard import chart, model
from gq.dashboard.http import Request
from gq.dashboard.security import BasicAuth, Csrf, host_allowed, is_loopback
from gq.store.admin import registered_queues
from gq.store.keys import QUEUE_REGISTRY
from tests.dashboard_support import make_dead, write_facts, write_history
from tests.helpers import Backend
from tests.queue_sides import BothSides


@pytest.fixture
def rq(backend: Backend) -> BothSides:
    return BothSides(backend.direct(), backend.queue)


def test_history_reads_the_minutes_across_two_hour_keys(rq: BothSides) -> None:
    now = 7 * 3600 + 10 * 60 + 30.0  # 07:10:30: the hour spans the 06:xx and 07:xx keys
    write_history(rq.client, rq.keys.name, {7 * 3600 + 600: (3, 2, 1), 6 * 3600 + 660: (5, 0)})
    write_history(rq.client, rq.keys.name, {6 * 3600 + 600: (99, 99)})  # 61 minutes back
    points = rq.history(now, 60)
    assert len(points) == 60 and points[-1] == (7 * 3600 + 600, 3, 2, 1)
    assert points[0] == (6 * 3600 + 660, 5, 0, 0)
    assert sum(point[1] for point in points) == 8


def test_history_ignores_values_that_are_not_counts(rq: BothSides) -> None:
    minute = 3600 * 5
    rq.client.hset(rq.keys.history(minute), mapping={f"done:{minute}": "x", f"failed:{minute}": -3})
    assert rq.history(minute + 1, 1) == [(minute, 0, 0, 0)]


def test_consumer_facts_tolerate_missing_and_malformed_values(rq: BothSides) -> None:
    facts = write_facts(rq.client, rq.keys.name, "a")
    rq.client.set(rq.keys.facts("b"), b"{not json")
    rq.client.set(rq.keys.facts("c"), json.dumps([1, 2]))
    assert rq.consumer_facts(["a", "b", "c", "missing"]) == [facts, None, None, None]
    assert rq.consumer_facts([]) == []


def test_pages_of_dead_and_scheduled_jobs(rq: BothSides) -> None:
    ids = make_dead(rq, [(f"{i}".encode(), "e") for i in range(5)])
    for i, job_id in enumerate(ids):
        rq.client.zadd(rq.keys.dead, {job_id: 100 + i})
    assert [e[0] for e in rq.dead_page(1, 2)] == [ids[3], ids[2]]
    assert rq.dead_page(5, 2) == [] and rq.dead_page(0, 0) == []
    producer = gq.Producer(rq.keys.name, client=rq.client)
    soon, later = producer.perform_at(1000, b"s"), producer.perform_at(2000, b"l")
    assert [(e[0], e[1]) for e in rq.scheduled_page(0, 5)] == [(soon, 1000.0), (later, 2000.0)]


def test_run_scheduled_moves_only_scheduled_jobs_to_the_tail(rq: BothSides) -> None:
    producer = gq.Producer(rq.keys.name, client=rq.client)
    ready = producer.perform(b"r")
    later = producer.perform_at(10**10, b"later")
    rq.client.delete(rq.keys.signal)
    assert rq.run_scheduled([later, "nope", ready]) == [True, False, False]
    assert [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)] == [ready, later]
    assert rq.client.zcard(rq.keys.scheduled) == 0 and rq.client.llen(rq.keys.signal) == 1
    assert rq.run_scheduled([]) == []


def test_exists_says_whether_redis_holds_anything_of_the_queue(rq: BothSides) -> None:
    assert not rq.exists()
    rq.register("c")
    assert rq.exists()


def test_registered_queues_are_read_with_a_bound(backend: Backend) -> None:
    client = backend.direct()
    names = [f"{backend.queue}_{i}" for i in range(30)]
    client.sadd(QUEUE_REGISTRY, *names)
    try:
        assert set(names) <= set(registered_queues(client))
        assert len(registered_queues(client, limit=5)) == 5
    finally:
        client.srem(QUEUE_REGISTRY, *names)


# -- pure parts ------------------------------------------------------------------------------


def test_basic_auth_parses_user_and_password() -> None:
    auth = BasicAuth.parse("u:p:q")
    good = "Basic " + base64.b64encode(b"u:p:q").decode()
    assert auth.allows(good) and not auth.allows(None) and not auth.allows("Basic !!!")
    assert not auth.allows("Bearer " + good.split()[1])
    for bad in ("", "user", ":pw", "user:"):
        with pytest.raises(ValueError):
            BasicAuth.parse(bad)


def test_csrf_tokens_are_signed_and_must_match_the_cookie() -> None:
    csrf, other = Csrf(b"k" * 32), Csrf(b"j" * 32)
    token = csrf.new_token()
    assert csrf.valid(token) and not other.valid(token)
    assert csrf.accepts(token, token)
    assert not csrf.accepts(token, csrf.new_token()) and not csrf.accepts(None, token)
    assert not csrf.accepts(token, None) and not csrf.valid("nodot") and not csrf.valid(None)


def test_host_check() -> None:
    def request(host: str) -> Request:
        return Request({"HTTP_HOST": host, "PATH_INFO": "/"})

    allowed = ["localhost", "127.0.0.1", "::1"]
    for host in ("localhost:8080", "127.0.0.1", "[::1]:80", "LOCALHOST"):
        assert host_allowed(request(host), allowed), host
    for host in ("evil.example", "localhost.evil.example:8080", "127.0.0.2"):
        assert not host_allowed(request(host), allowed), host
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_chart_scale_is_a_round_number_above_the_peak() -> None:
    assert [chart.nice_ceiling(v) for v in (0, 1, 3, 7, 11, 40, 999)] == [1, 1, 5, 10, 20, 50, 1000]
    drawn = chart.throughput([{"minute": 0, "done": 10, "retried": 0, "dead": 0}] * 2)
    assert drawn["peak"] == 10 and drawn["done"].split()[0] == f"{chart.LEFT:.1f},{chart.TOP:.1f}"


def test_data_is_shown_as_text_or_hex_and_cut() -> None:
    assert model.shown_data(b"hi <b>", 10)["text"] == "hi <b>"
    binary = model.shown_data(b"\xff\x00", 10)
    assert binary["hex"] == "ff 00" and binary["text"] is None
    cut = model.shown_data(b"x" * 20, 10)
    assert cut["text"] == "x" * 10 and cut["truncated"] and cut["size"] == 20
