"""Flow control from the shell (SPEC section 9): ``gq pause``, ``gq resume``, ``gq limit``,
``gq cancel`` and the flow lines of ``gq stats``, run as real processes against a real
redis-server, with the effect checked through ``gq.Queue`` and Redis."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest

import gq
from tests.cli_support import ADMIN, env_for, run
from tests.helpers import RedisServer, delete_keys
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[BothSides]:
    name = f"test_flow_cli_{uuid.uuid4().hex[:8]}"
    yield BothSides(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")


@pytest.fixture
def queue(rq: BothSides) -> gq.Queue:
    return gq.Queue(rq.keys.name, client=rq.client)


def gq_cmd(rq: BothSides, server: RedisServer, *args: str) -> tuple[int, str, str]:
    result = run(ADMIN, *args, env=env_for(server.url, rq.keys.name))
    return result.returncode, result.stdout, result.stderr


def error_lines(stderr: str) -> list[str]:
    """The lines that give a reason (argparse prints its usage lines before)."""
    return [line for line in stderr.splitlines() if "error:" in line]


# -- pause and resume ------------------------------------------------------------------------


def test_pause_and_resume_round_trip(
    redis_server: RedisServer, rq: BothSides, queue: gq.Queue
) -> None:
    assert not queue.paused
    code, out, err = gq_cmd(rq, redis_server, "pause")
    assert code == 0, err
    assert queue.paused
    assert f"queue {rq.keys.name} paused" in out
    code, out, err = gq_cmd(rq, redis_server, "pause")  # again: still paused, still fine
    assert code == 0 and queue.paused and "already" in out, err
    code, out, err = gq_cmd(rq, redis_server, "resume")
    assert code == 0, err
    assert not queue.paused
    assert f"queue {rq.keys.name} resumed" in out


def test_pause_names_the_queue_given_by_flag(redis_server: RedisServer, rq: BothSides) -> None:
    other = gq.Queue(f"{rq.keys.name}_other", client=rq.client)
    code, _, err = gq_cmd(rq, redis_server, "pause", "--queue", other.name)
    assert code == 0, err
    assert other.paused and not gq.Queue(rq.keys.name, client=rq.client).paused


# -- limit -----------------------------------------------------------------------------------


def test_limit_sets_shows_changes_one_and_clears(
    redis_server: RedisServer, rq: BothSides, queue: gq.Queue
) -> None:
    code, out, err = gq_cmd(rq, redis_server, "limit")
    assert code == 0, err
    assert re.search(r"^rate\s+none$", out, re.M) and re.search(r"^concurrency\s+none", out, re.M)

    code, out, err = gq_cmd(rq, redis_server, "limit", "--rate", "20/1", "--concurrency", "5")
    assert code == 0, err
    assert queue.limits() == {"rate": (20, 1.0), "concurrency": 5}
    assert re.search(r"^rate\s+20 jobs per 1s$", out, re.M), out
    assert re.search(r"^concurrency\s+5 \(0 held now\)$", out, re.M), out

    gq_cmd(rq, redis_server, "limit", "--rate", "100/60")  # the concurrency limit stays
    assert queue.limits() == {"rate": (100, 60.0), "concurrency": 5}
    gq_cmd(rq, redis_server, "limit", "--concurrency", "3")  # the rate limit stays
    assert queue.limits() == {"rate": (100, 60.0), "concurrency": 3}
    gq_cmd(rq, redis_server, "limit", "--rate", "5/0.5")
    assert queue.limits() == {"rate": (5, 0.5), "concurrency": 3}

    code, out, err = gq_cmd(rq, redis_server, "limit")  # show, change nothing
    assert code == 0, err
    assert re.search(r"^rate\s+5 jobs per 0.5s$", out, re.M), out
    assert re.search(r"^concurrency\s+3 ", out, re.M), out
    assert queue.limits() == {"rate": (5, 0.5), "concurrency": 3}

    code, out, err = gq_cmd(rq, redis_server, "limit", "--clear")
    assert code == 0, err
    assert queue.limits() == {"rate": None, "concurrency": None}
    assert re.search(r"^rate\s+none$", out, re.M), out


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--rate", "0/1"], "at least 1 job per period"),
        (["--rate", "abc"], "invalid rate 'abc'"),
        (["--rate", "5/0"], "period must be at least 1ms"),
        (["--rate", "5/-1"], "invalid period '-1'"),
        (["--rate", "5/1e400"], "invalid period"),
        (["--rate", "1/1e23"], "period must be at most 30d"),
        (["--rate", "1/31d"], "period must be at most 30d"),
        (["--rate", "2000000000/1"], "at most 1000000000 jobs per period"),
        (["--concurrency", "-1"], "must be at least 1, not -1"),
        (["--concurrency", "0"], "must be at least 1, not 0"),
        (["--concurrency", "many"], "invalid number 'many'"),
        (["--clear", "--rate", "1/1"], "--clear removes both limits: give it alone"),
    ],
)
def test_a_bad_limit_exits_2_with_one_reason_and_changes_nothing(
    redis_server: RedisServer, rq: BothSides, queue: gq.Queue, args: list[str], reason: str
) -> None:
    queue.set_limits(rate=(7, 2.0), concurrency=4)
    code, out, err = gq_cmd(rq, redis_server, "limit", *args)
    assert code == 2, (out, err)
    [line] = error_lines(err)
    assert reason in line, err
    assert "Traceback" not in err and out == ""
    assert queue.limits() == {"rate": (7, 2.0), "concurrency": 4}


# -- a handler's RateLimited hold ------------------------------------------------------------


@pytest.mark.parametrize("hold", [b"inf", b"1e400", b"nan", b"junk", b"far"])
def test_stats_limit_and_resume_read_any_hold_and_resume_lifts_it(
    redis_server: RedisServer, rq: BothSides, queue: gq.Queue, hold: bytes
) -> None:
    seconds, _ = rq.client.time()
    far = str((int(seconds) + 7 * 86400) * 1000).encode()  # a week: beyond the cap of a day
    rq.client.hset(rq.keys.flow, "hold_until", far if hold == b"far" else hold)
    capped = hold in (b"inf", b"1e400", b"far")
    for command in (["stats"], ["stats", "--json"], ["limit"]):
        code, out, err = gq_cmd(rq, redis_server, *command)
        assert code == 0 and "Traceback" not in err, (command, err)
        assert ("86400s more" in out or '"held_back_seconds": 86400' in out) == capped, out
    code, out, err = gq_cmd(rq, redis_server, "resume")
    assert code == 0, err
    assert ("lifted a RateLimited hold of 86400s more" in out) == capped, out
    assert rq.client.hget(rq.keys.flow, "hold_until") is None
    assert queue.stats()["held_back_seconds"] == 0


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_removes_ready_and_scheduled_jobs_and_counts_the_unknown(
    redis_server: RedisServer, rq: BothSides
) -> None:
    producer = gq.Producer(rq.keys.name, client=rq.client)
    ready, stays = producer.perform_many([b"cancel me", b"stay"])
    later = producer.perform_after(3600, b"later")
    code, out, err = gq_cmd(rq, redis_server, "cancel", ready, later, "no-such-id", ready)
    assert code == 0, err  # an unknown id is not a failure
    assert "removed 2 ready or scheduled job(s)" in out
    assert "cancel requested for 0 running job(s)" in out
    assert "not found: 1" in out and "no-such-id" in err
    assert [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)] == [stays]
    assert rq.counts()["scheduled"] == 0
    assert rq.messages([ready, later, stays])[:2] == [None, None]


def test_cancel_of_a_running_job_is_a_request(redis_server: RedisServer, rq: BothSides) -> None:
    [running] = gq.Producer(rq.keys.name, client=rq.client).perform_many([b"busy"])
    rq.register("worker-a")
    assert rq.fetch("worker-a", 1)[0][0] == running
    code, out, err = gq_cmd(rq, redis_server, "cancel", running)
    assert code == 0, err
    assert "removed 0 " in out and "cancel requested for 1 running job(s)" in out
    assert rq.client.zscore(rq.keys.cancelled, running) is not None


def test_cancel_needs_an_id(redis_server: RedisServer, rq: BothSides) -> None:
    code, _, err = gq_cmd(rq, redis_server, "cancel")
    assert code == 2 and "the following arguments are required: ID" in err


# -- stats -----------------------------------------------------------------------------------


def test_stats_show_paused_and_the_limits(
    redis_server: RedisServer, rq: BothSides, queue: gq.Queue
) -> None:
    code, out, err = gq_cmd(rq, redis_server, "stats")
    assert code == 0, err
    assert re.search(r"^paused\s+no$", out, re.M), out
    assert re.search(r"^limits\s+rate none, concurrency none \(0 held now\)$", out, re.M), out

    gq.Producer(rq.keys.name, client=rq.client).perform(b"x")
    rq.register("worker-a")
    assert rq.fetch("worker-a", 1)  # one job held by a gq consumer
    queue.pause()
    queue.set_limits(rate=(100, 60.0), concurrency=20)
    code, out, err = gq_cmd(rq, redis_server, "stats")
    assert code == 0, err
    assert re.search(r"^paused\s+yes", out, re.M), out
    assert re.search(r"^limits\s+rate 100 jobs per 60s, concurrency 20 \(1 held now\)$", out, re.M)

    code, out, err = gq_cmd(rq, redis_server, "stats", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["paused"] is True
    assert report["rate_limit"] == {"jobs": 100, "per": 60.0}
    assert report["concurrency_limit"] == 20 and report["held"] == 1
    assert report["held_back_seconds"] == 0
    assert report["in_flight"] == 1 and report["ready"] == 0


def test_help_lists_the_flow_commands() -> None:
    result = run(ADMIN, "--help")
    assert result.returncode == 0
    for command in ("pause", "resume", "limit", "cancel"):
        assert command in result.stdout
        sub = run(ADMIN, command, "--help")
        assert sub.returncode == 0 and "--queue" in sub.stdout, command
