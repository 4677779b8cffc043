"""Far-future, infinite and unreadable times (issue #15, defect 11): producers refuse a
schedule past their bound, and whatever times Redis holds anyway (written by curlyq, an
older gq or a hand), every page, JSON view and ``gq`` listing shows them as text."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

import gq
from gq import dashboard, display
from gq import job as jobs
from gq.dashboard import filters
from tests.cli_support import ADMIN, env_for, run
from tests.dashboard_support import Http, registered_queue, serving
from tests.helpers import Backend, RedisServer, delete_keys
from tests.queue_sides import BothSides

# Times no formatter may fail on: infinities, NaN, beyond datetime's years, huge ints.
ODD_TIMES = [math.inf, -math.inf, math.nan, 1e15, -1e15, 1e300, -1e300, 10**400, -5, 0, 42.5]
# What Lua writes for a huge hold_until (its number formatting), and what a hand may.
ODD_HOLDS = ["inf", "1e+18", "nan", "-inf", "soon"]


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.perform_at(1e15, b"x"),
        lambda p: p.perform_at(253402300800.0, b"x"),  # 10000-01-01T00:00:00Z
        lambda p: p.perform_after(1e15, b"x"),
        lambda p: p.perform_after(timedelta(days=365 * 8000), b"x"),
    ],
    ids=["at-1e15", "at-year-10000", "after-1e15", "after-8000-years"],
)
def test_a_schedule_past_the_bound_is_refused_and_nothing_is_written(
    backend: Backend, call: object
) -> None:
    producer = gq.Producer(backend.queue, client=backend.client())
    with pytest.raises(gq.ConfigurationError, match="at most"):
        call(producer)  # type: ignore[operator]
    assert backend.direct().keys(f"{backend.queue}*") == []


def test_a_schedule_within_the_bound_is_stored(backend: Backend) -> None:
    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform_after(timedelta(days=365 * 99), b"late")
    producer.perform_at(datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc), b"last")
    assert backend.direct().zcard(f"{backend.queue}:scheduled") == 2


@pytest.mark.parametrize("value", ODD_TIMES, ids=lambda v: repr(v)[:12])
def test_every_time_formatter_is_total(value: float) -> None:
    now = 1_700_000_000.0
    shown = [
        display.age(value),
        display.relative(value, now),
        display.relative(now, value),
        display.local_time(value),
        filters.duration(value),
        filters.utc(value),
        filters.ago(value, now),
        filters.ago(now, value),
    ]
    assert all(isinstance(text, str) and text for text in shown), shown
    assert not any("nan" in text.lower() for text in shown), shown


def test_far_and_infinite_times_read_as_words() -> None:
    assert display.age(math.inf) == "forever"
    assert display.age(math.nan) == "-"
    assert display.age(86400 * 365 * 3 + 86400 * 5) == "3y005d"
    assert filters.utc(1e15) == "after year 9999"
    assert filters.utc(-1e15) == "before year 1"
    assert filters.ago(math.inf, 0) == "never"


@pytest.fixture
def far(backend: Backend) -> Iterator[BothSides]:
    """A registered queue with a job due far beyond any bound, and one due at +inf (as a
    Go producer could schedule them), held back by a RateLimited hold of "inf"."""
    client = backend.client()
    with registered_queue(client, "far") as rq:
        for job_id, score in [("far", 1e15), ("inf", math.inf)]:
            client.hset(rq.keys.data, job_id, jobs.encode(gq.Job(id=job_id, data=b"d")))
            client.zadd(rq.keys.scheduled, {job_id: score})
        client.hset(rq.keys.flow, "hold_until", "inf")
        yield rq


def test_pages_and_json_views_answer_with_far_times_and_a_huge_hold(far: BothSides) -> None:
    name = far.keys.name
    with serving(dashboard.app(client=far.client)) as address:
        http = Http(address)
        for path in (f"/queues/{name}/scheduled", f"/queues/{name}", "/"):
            reply = http.get(path)
            assert reply.status == 200, (path, reply.body[:300])
        assert "after year 9999" in http.get(f"/queues/{name}/scheduled").body
        for path in (f"/api/queues/{name}", f"/api/queues/{name}/scheduled", "/api/queues"):
            reply = http.get(path)
            assert reply.status == 200, (path, reply.body[:300])
            json.loads(reply.body)  # strict JSON: no Infinity or NaN
        jobs_shown = json.loads(http.get(f"/api/queues/{name}/scheduled").body)["jobs"]
        assert {row["id"]: row["when"] for row in jobs_shown} == {"far": 1e15, "inf": None}


@pytest.mark.parametrize("hold", ODD_HOLDS)
def test_any_hold_written_in_redis_reads_as_a_finite_hold(backend: Backend, hold: str) -> None:
    with registered_queue(backend.client(), "hold") as rq:
        rq.client.hset(rq.keys.flow, "hold_until", hold)
        held_back = gq.Queue(rq.keys.name, client=rq.client).stats()["held_back_seconds"]
        assert math.isfinite(held_back) and held_back >= 0
        # fetch.lua holds a queue back a day at most (RateLimited.MAX_AFTER): so do readers.
        assert (held_back == gq.RateLimited.MAX_AFTER) == (hold in ("inf", "1e+18"))


def test_gq_lists_far_scheduled_jobs_and_stats_a_huge_hold(redis_server: RedisServer) -> None:
    client = redis_server.client()
    with registered_queue(client, "far_cli") as rq:
        client.hset(rq.keys.data, "far", jobs.encode(gq.Job(id="far", data=b"d")))
        client.zadd(rq.keys.scheduled, {"far": 1e15})
        client.hset(rq.keys.flow, "hold_until", "inf")
        env = env_for(redis_server.url, rq.keys.name)
        listed = run(ADMIN, "scheduled", "list", env=env)
        assert listed.returncode == 0, listed.stderr
        assert "after year 9999" in listed.stdout
        for args in (("stats",), ("stats", "--json"), ("limit",)):
            shown = run(ADMIN, *args, env=env)
            assert shown.returncode == 0, (args, shown.stderr)
        delete_keys(client, f"{rq.keys.name}*")
