"""The ``gq`` operator tool as a user runs it: a subprocess against a real redis-server,
with the effect of each command checked in Redis."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import gq
from gq import job as jobs
from tests.cli_support import ADMIN, WORKER, closed_port_url, env_for, run, start_password_server
from tests.helpers import Backend, RedisServer, delete_keys, stop_process
from tests.queue_sides import BothSides


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[BothSides]:
    name = f"test_cli_{uuid.uuid4().hex[:8]}"
    yield BothSides(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")


def gq_cmd(
    rq: BothSides, server: RedisServer, *args: str, input: bytes | None = None
) -> tuple[int, str, str]:
    result = run(ADMIN, *args, env=env_for(server.url, rq.keys.name), input=input)
    return result.returncode, result.stdout, result.stderr


def push(rq: BothSides, *data: bytes) -> list[str]:
    return gq.Producer(rq.keys.name, client=rq.client).perform_many(list(data))


def make_dead(rq: BothSides, n: int, attempt: int = 5) -> list[str]:
    """``n`` dead jobs, as a consumer that gave up on them leaves them (active must be empty)."""
    ids = push(rq, *(f"dead {i}".encode() for i in range(n)))
    consumer = str(uuid.uuid4())
    rq.register(consumer)
    for job_id, message in rq.fetch(consumer, n):
        assert message is not None
        job = jobs.decode(message)
        updated = jobs.encode(gq.Job(id=job.id, data=job.data, attempt=attempt), error="boom")
        assert rq.kill(consumer, job_id, updated, dead_max_jobs=100, dead_max_age=1e6)
    rq.deregister(consumer)
    return ids


def attempt_of(rq: BothSides, job_id: str) -> int:
    [message] = rq.messages([job_id])
    assert message is not None
    return jobs.decode(message).attempt


def active(rq: BothSides) -> list[str]:
    return [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)]


def add_stale_consumer(rq: BothSides, name: str = "gone") -> None:
    rq.client.zadd(rq.keys.consumers, {rq.keys.inflight(name): time.time() - 3600})


# -- stats and consumers -------------------------------------------------------------------------


def test_stats_counts_every_state(redis_server: RedisServer, rq: BothSides) -> None:
    make_dead(rq, 2)
    [running] = push(rq, b"running")
    rq.register("busy")
    assert rq.fetch("busy", 1)[0][0] == running
    ready = push(rq, b"1", b"2", b"3")
    producer = gq.Producer(rq.keys.name, client=rq.client)
    producer.perform_at(1.0, b"due")
    producer.perform_after(3600, b"later")
    add_stale_consumer(rq)
    # The next ready job has waited 90 s by its ReadyAt (the Producer writes it).
    ready_at = rq.server_time() - 90
    rq.client.hset(
        rq.keys.data, ready[0], jobs.encode(gq.Job(id=ready[0], data=b"1"), ready_at=ready_at)
    )

    code, out, err = gq_cmd(rq, redis_server, "stats", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert 90 <= report.pop("oldest_ready_age") < 120
    assert report == {
        "queue": rq.keys.name,
        "ready": 3,
        "scheduled": 2,
        "due": 1,
        "dead": 2,
        "grouped": 0,
        "in_flight": 1,
        "consumers_alive": 1,
        "consumers_silent": 0,
        "consumers_dead": 1,
        "next_ready": ready[0],
        # flow control (SPEC section 9; tests/test_flow_cli.py): none set
        "paused": False,
        "rate_limit": None,
        "concurrency_limit": None,
        "held": 1,
        "held_back_seconds": 0.0,
        # groups (SPEC section 17; tests/test_groups.py): none
        "groups": {"waiting_groups": 0, "busiest": [],
                   "limits": {"rate_limit": None, "concurrency_limit": None}},  # fmt: skip
    }
    code, out, err = gq_cmd(rq, redis_server, "stats")
    assert code == 0, err
    for pattern in (
        rf"^ready\s+3\s+\(next: {ready[0]}, ready for 1m3\ds\)$",
        r"^scheduled\s+2\s+\(1 due\)$",
        r"^in flight\s+1$",
        r"^dead\s+2$",
        r"^consumers\s+1 alive, 0 silent, 1 dead$",
    ):
        assert re.search(pattern, out, re.MULTILINE), out


def test_consumers_shows_last_heartbeat_jobs_in_flight_and_state(
    redis_server: RedisServer, rq: BothSides
) -> None:
    push(rq, b"a", b"b", b"c")
    rq.register("worker-a")
    rq.fetch("worker-a", 2)
    add_stale_consumer(rq)
    code, out, err = gq_cmd(rq, redis_server, "consumers", "--json")
    assert code == 0, err
    entries = {entry["consumer"]: entry for entry in map(json.loads, out.splitlines())}
    assert entries["worker-a"]["in_flight"] == 2 and entries["worker-a"]["alive"]
    assert entries["gone"]["in_flight"] == 0 and not entries["gone"]["alive"]
    assert entries["gone"]["seconds_since_heartbeat"] >= 3600 - 60

    code, out, err = gq_cmd(rq, redis_server, "consumers")
    assert code == 0, err
    assert re.search(r"^worker-a\s.*\s2\s+alive$", out, re.MULTILINE), out
    assert re.search(r"^gone\s.*1h0\dm ago\s+0\s+dead: silent for 1h0\dm$", out, re.MULTILINE), out


# -- enqueue ---------------------------------------------------------------------------------------


def test_enqueue_from_arguments_and_from_stdin_lines(
    redis_server: RedisServer, rq: BothSides
) -> None:
    code, out, err = gq_cmd(rq, redis_server, "enqueue", "hello", "wörld")
    assert code == 0, err
    from_args = out.split()
    code, out, err = gq_cmd(rq, redis_server, "enqueue", input=b"one\n\ntwo\r\nthree")
    assert code == 0, err
    from_stdin = out.split()
    assert active(rq) == from_args + from_stdin
    messages = [jobs.decode(m).data for m in rq.messages(active(rq)) if m is not None]
    assert messages == [b"hello", "wörld".encode(), b"one", b"two", b"three"]


def test_enqueue_with_an_id_and_at_or_after_a_time(
    redis_server: RedisServer, rq: BothSides
) -> None:
    code, out, err = gq_cmd(rq, redis_server, "enqueue", "--id", "job-1", "data")
    assert (code, out.strip()) == (0, "job-1"), err
    code, out, err = gq_cmd(rq, redis_server, "enqueue", "--id", "job-1", "again")
    assert code == 1 and "already exists" in err
    code, _, err = gq_cmd(rq, redis_server, "enqueue", "--id", "job-2", "a", "b")
    assert code == 2 and "--id needs exactly one job" in err

    code, out, err = gq_cmd(
        rq, redis_server, "enqueue", "--at", "2030-01-31T09:00:00+00:00", "--id", "at-iso", "x"
    )
    assert code == 0, err
    code, out, err = gq_cmd(rq, redis_server, "enqueue", "--at", "1234.5", "--id", "at-unix", "x")
    assert code == 0, err
    before = rq.server_time()
    code, out, err = gq_cmd(rq, redis_server, "enqueue", "--after", "2h", "--id", "after", "x")
    assert code == 0, err
    scores = dict(rq.client.zrange(rq.keys.scheduled, 0, -1, withscores=True))
    assert scores[b"at-iso"] == 1896080400.0
    assert scores[b"at-unix"] == 1234.5
    assert before + 7200 <= scores[b"after"] <= rq.server_time() + 7200
    code, _, err = gq_cmd(rq, redis_server, "enqueue", "--at", "1", "--after", "1", "x")
    assert code == 2 and "not allowed with argument" in err


# -- dead jobs ---------------------------------------------------------------------------


def test_dead_list_shows_when_attempt_data_and_error(
    redis_server: RedisServer, rq: BothSides
) -> None:
    ids = make_dead(rq, 3)
    code, out, err = gq_cmd(rq, redis_server, "dead", "list", "--json")
    assert code == 0, err
    entries = [json.loads(line) for line in out.splitlines()]
    assert sorted(entry["id"] for entry in entries) == sorted(ids)
    assert all(
        e["attempt"] == 5 and e["error"] == "boom" and e["data"].startswith("dead ")
        for e in entries
    )
    code, out, err = gq_cmd(rq, redis_server, "dead", "list", "--limit", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["ID", "KILLED", "ATTEMPT"]
    assert len(lines) == 4 and "2 of 3 dead jobs shown" in lines[-1]
    assert re.search(r"ago .* 5\s+'dead \d'\s+boom$", lines[1]), out


def test_dead_retry_one_several_or_all(redis_server: RedisServer, rq: BothSides) -> None:
    ids = make_dead(rq, 6)
    code, out, err = gq_cmd(rq, redis_server, "dead", "retry", ids[0])
    assert (code, out.strip()) == (0, "retried 1 job(s)"), err
    assert active(rq) == [ids[0]] and attempt_of(rq, ids[0]) == 5  # one more try, as Sidekiq
    code, out, err = gq_cmd(rq, redis_server, "dead", "retry", "--reset-attempts", ids[1], ids[2])
    assert code == 0, err
    assert active(rq) == ids[:3] and attempt_of(rq, ids[1]) == attempt_of(rq, ids[2]) == 0
    code, out, err = gq_cmd(rq, redis_server, "dead", "retry", ids[3], "no-such-id")
    assert code == 1 and "not in the dead set: no-such-id" in err and "retried 1" in out
    code, out, err = gq_cmd(rq, redis_server, "dead", "retry", "--all")
    assert (code, out.strip()) == (0, "retried 2 job(s)"), err
    assert sorted(active(rq)) == sorted(ids) and len(active(rq)) == len(ids)
    assert rq.counts()["dead"] == 0 and rq.client.llen(rq.keys.signal) == 1
    code, _, err = gq_cmd(rq, redis_server, "dead", "retry")
    assert code == 2 and "give job ids or --all" in err


def test_dead_delete_frees_the_ids(redis_server: RedisServer, rq: BothSides) -> None:
    ids = make_dead(rq, 4)
    code, out, err = gq_cmd(rq, redis_server, "dead", "delete", ids[0], ids[1])
    assert (code, out.strip()) == (0, "deleted 2 job(s)"), err
    assert rq.messages(ids[:2]) == [None, None]
    assert gq.Producer(rq.keys.name, client=rq.client).perform(gq.Job(id=ids[0]))  # id free
    code, out, err = gq_cmd(rq, redis_server, "dead", "delete", "--all")
    assert (code, out.strip()) == (0, "deleted 2 job(s)"), err
    assert rq.counts()["dead"] == 0 and rq.messages(ids[2:]) == [None, None]


# -- scheduled jobs -------------------------------------------------------------------------------


def test_scheduled_list_and_delete(redis_server: RedisServer, rq: BothSides) -> None:
    producer = gq.Producer(rq.keys.name, client=rq.client)
    later = producer.perform_after(7200, b"later")
    soon = producer.perform_after(60, b"soon")
    other = producer.perform_after(3600, b"other")
    code, out, err = gq_cmd(rq, redis_server, "scheduled", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [soon, other, later]
    assert re.search(r"in \d+s .* 0\s+'soon'$", lines[1]), out
    code, out, err = gq_cmd(rq, redis_server, "scheduled", "delete", soon)
    assert (code, out.strip()) == (0, "deleted 1 job(s)"), err
    code, out, err = gq_cmd(rq, redis_server, "scheduled", "list", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [other, later]
    code, out, err = gq_cmd(rq, redis_server, "scheduled", "delete", "--all")
    assert (code, out.strip()) == (0, "deleted 2 job(s)"), err
    assert rq.counts()["scheduled"] == 0 and rq.messages([soon, other, later]) == [None] * 3


# -- usage, reachability, credentials -----------------------------------------------------


def test_help_lists_every_command_and_the_exit_codes() -> None:
    result = run(ADMIN, "--help")
    assert result.returncode == 0
    for command in ("stats", "enqueue", "dead", "scheduled", "consumers", "demo", "exit codes"):
        assert command in result.stdout
    for command in ("stats", "enqueue", "dead retry", "scheduled list", "consumers"):
        sub = run(ADMIN, *command.split(), "--help")
        assert sub.returncode == 0 and "--url" in sub.stdout and "--queue" in sub.stdout


@pytest.mark.parametrize(
    "args, reason",
    [
        (["stats"], "no queue: pass --queue NAME or set GQ_QUEUE"),
        (["nonsense"], "invalid choice: 'nonsense'"),
        (["dead"], "the following arguments are required: ACTION"),
        (["enqueue", "--after", "soon", "x", "--queue", "q"], "invalid duration"),
    ],
)
def test_bad_usage_exits_2(redis_server: RedisServer, args: list[str], reason: str) -> None:
    result = run(ADMIN, *args, env=env_for(redis_server.url, None))
    assert result.returncode == 2
    assert reason in result.stderr


def test_unreachable_redis_exits_3() -> None:
    url = closed_port_url()
    result = run(ADMIN, "stats", "--url", url, "--queue", "q")
    assert result.returncode == 3
    assert f"cannot use Redis at {url}" in result.stderr and "Traceback" not in result.stderr


def test_a_password_in_the_query_string_is_never_printed() -> None:
    url = closed_port_url() + "?password=query-secret-42"
    for command in ([*ADMIN, "stats"], [*WORKER, "tests.handlers:record"]):
        result = run(command, "--url", url, "--queue", "q")
        assert result.returncode == 3
        assert "cannot use Redis" in result.stderr
        assert "query-secret-42" not in result.stdout + result.stderr
    misplaced = run(ADMIN, "redis://user:pw-in-a-typo@localhost/0")  # quoted by argparse
    assert misplaced.returncode == 2 and "redis://user:***@localhost/0" in misplaced.stderr
    assert "pw-in-a-typo" not in misplaced.stderr


def test_credentials_are_checked_and_never_printed(tmp_path: Path) -> None:
    password = "pw-" + uuid.uuid4().hex[:10]
    proc, server = start_password_server(tmp_path, password)
    try:
        wrong = "nope-" + uuid.uuid4().hex[:6]
        refused = run(ADMIN, "stats", "--url", server.url.replace(password, wrong), "--queue", "q")
        assert refused.returncode == 3
        assert "redis://:***@" in refused.stderr
        enqueued = run(ADMIN, "enqueue", "--url", server.url, "--queue", "q", "x")
        assert enqueued.returncode == 0, enqueued.stderr
        stats = run(ADMIN, "stats", "--url", server.url, "--queue", "q")
        assert stats.returncode == 0 and re.search(r"^ready\s+1 ", stats.stdout, re.M)
        for result in (refused, enqueued, stats):
            for secret in (password, wrong):
                assert secret not in result.stdout + result.stderr
    finally:
        stop_process(proc)


# -- the scripts behind the admin commands (on fakeredis and on a real Redis) ------------


def test_admin_scripts_return_what_their_headers_say(backend: Backend) -> None:
    q, c = BothSides(backend.client(), backend.queue), backend.direct()
    q.push([("ready", b"m")])
    c.zadd(q.keys.scheduled, {"due": 1.0, "later": 4e9})
    c.sadd(q.keys.inflight("c1"), "running")
    # backlog.lua: ready, due, this consumer's in flight, the fields of the groups' lines
    assert q.backlog("c1") == (1, 1, 1, 0)
    assert q.backlog("other") == (1, 1, 0, 0)

    c.zadd(q.keys.dead, {"d1": 1.0, "d2": 2.0, "no-message": 3.0})
    c.hset(q.keys.data, mapping={"d1": b"m1", "d2": b"m2"})
    entries = [("d1", None), ("d2", b"new"), ("no-message", None), ("absent", None)]
    assert q.retry_dead(entries) == [True, True, False, False]  # retry_dead.lua
    assert active(q) == ["ready", "d1", "d2"] and c.zcard(q.keys.dead) == 0
    assert q.messages(["d1", "d2"]) == [b"m1", b"new"] and c.llen(q.keys.signal) == 1

    c.zadd(q.keys.dead, {"x": 1.0})
    c.hset(q.keys.data, "x", b"m")
    c.hset(q.keys.recovered, "x", 2)
    assert q.delete_dead(["x", "x", "ready"]) == [True, False, False]  # delete_jobs.lua
    assert q.messages(["x", "ready"]) == [None, b"m"] and not c.hexists(q.keys.recovered, "x")
    assert q.delete_scheduled(["due", "ready"]) == [True, False]
    assert q.counts() == {"ready": 3, "scheduled": 1, "due": 0, "dead": 0}
