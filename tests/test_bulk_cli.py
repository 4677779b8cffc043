"""``gq jobs``, ``gq purge``, ``gq move``, ``gq dead retry|delete`` by filter and
``gq scheduled reschedule`` as a user runs them: subprocesses against a real redis-server,
each command's output and exit code, and its effect checked in Redis."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from tests.bulk_support import Jobs
from tests.cli_support import ADMIN, env_for, run
from tests.helpers import RedisServer, delete_keys

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def w(redis_server: RedisServer) -> Iterator[Jobs]:
    name = f"test_ops_{uuid.uuid4().hex[:8]}"
    yield Jobs(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")


def gq_cmd(
    w: Jobs, server: RedisServer, *args: str, queue: str | None = None
) -> tuple[int, str, str]:
    env = env_for(server.url, queue or w.q.keys.name)
    result = run(ADMIN, *args, env=env, input=b"")
    return result.returncode, result.stdout, result.stderr


def test_gq_jobs_lists_matching_jobs_as_a_table_and_as_json(
    w: Jobs, redis_server: RedisServer
) -> None:
    acme = w.dead("app.send", "a@x", tenant="acme", error="SMTP timeout")
    w.dead("app.send", "b@x", tenant="beta", error="SMTP timeout")
    w.ready("app.send", "c@x", tenant="acme")
    code, out, err = gq_cmd(w, redis_server, "jobs", "--state", "dead", "--task", "app.send",
                            "--args", "tenant=acme")  # fmt: skip
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:4] == ["ID", "STATE", "TASK", "ARGS"]
    assert row.startswith(acme) and "'a@x', tenant='acme'" in row and "SMTP timeout" in row
    code, out, err = gq_cmd(w, redis_server, "jobs", "--args", "tenant=acme", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert sorted(job["state"] for job in found) == ["dead", "ready"]
    assert all(
        {"id", "task", "state", "args", "enqueued_at", "due_at", "died_at"} <= set(j) for j in found
    )
    # (the arguments as the task was called, for scripts; as the table shows them beside)
    dead = next(job for job in found if job["id"] == acme)
    assert (dead["args"], dead["kwargs"]) == (["a@x"], {"tenant": "acme"})
    assert dead["args_text"] == "'a@x', tenant='acme'"


def test_gq_jobs_json_gives_arguments_json_lacks_as_text(
    w: Jobs, redis_server: RedisServer
) -> None:
    made = w.ready("app.t", b"caf\xc3\xa9", b"\xff", when=datetime(2026, 1, 2, tzinfo=timezone.utc))
    code, out, err = gq_cmd(w, redis_server, "jobs", "--json")
    assert code == 0, err
    [job] = json.loads(out)
    assert job["id"] == made
    assert job["args"] == ["café", "b'\\xff'"]
    assert job["kwargs"] == {"when": "2026-01-02T00:00:00+00:00"}


def test_gq_jobs_pages_with_a_cursor(w: Jobs, redis_server: RedisServer) -> None:
    made = [w.ready("app.t", i) for i in range(7)]
    code, out, err = gq_cmd(w, redis_server, "jobs", "--limit", "4", "--json")
    first = [job["id"] for job in json.loads(out)]
    cursor = err.split("--cursor '")[1].split("'")[0]
    code, out, err = gq_cmd(w, redis_server, "jobs", "--limit", "4", "--json", "--cursor", cursor)
    assert code == 0, err
    rest = [job["id"] for job in json.loads(out)]
    assert first + rest == made[::-1] and "--cursor" not in err


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("jobs", "--state", "bogus"), "unknown state 'bogus'"),
        (("jobs", "--args", "tenant"), "KEY=VALUE"),
        (("jobs", "--older-than", "2x"), "invalid duration '2x'"),
        (("purge", "--state", "dead", "--task", "t"), "'dead' is not for this action"),
        (("move", "--to", "SAME", "--task", "t"), "same queue"),
        (("scheduled", "reschedule", "--task", "t"), "--at TIME or --in DELAY"),
        (("dead", "delete", "x", "--task", "t"), "give job ids or --all, or filter flags"),
    ],
)
def test_a_wrong_filter_or_action_exits_2_with_its_reason(
    w: Jobs, redis_server: RedisServer, args: tuple[str, ...], reason: str
) -> None:
    w.ready("app.t")
    args = tuple(w.q.keys.name if a == "SAME" else a for a in args)
    code, out, err = gq_cmd(w, redis_server, *args)
    assert code == 2 and reason in err, (out, err)


def test_gq_purge_counts_first_asks_for_everything_and_removes(
    w: Jobs, redis_server: RedisServer
) -> None:
    old = [w.ready("app.broken", i) for i in range(3)]
    fine = w.ready("app.fine")
    code, out, _ = gq_cmd(w, redis_server, "purge", "--task", "app.broken", "--dry-run")
    assert (code, out.strip()) == (0, "would purge 3 job(s) (dry run: nothing changed)")
    assert w.active() == [*old, fine]
    code, _, err = gq_cmd(w, redis_server, "purge")
    assert code == 2 and "--yes" in err and w.active() == [*old, fine]
    code, out, _ = gq_cmd(w, redis_server, "purge", "--task", "app.broken", "--older-than", "0s")
    assert (code, out.strip()) == (0, "purged 3 job(s)")
    assert w.active() == [fine] and not any(w.has_message(i) for i in old)
    code, out, _ = gq_cmd(w, redis_server, "purge", "--yes", "--json")
    assert code == 0 and json.loads(out) == {
        "matched": 1,
        "done": 1,
        "conflicts": 0,
        "dry_run": False,
    }


def test_gq_purge_of_a_queue_that_does_not_exist_says_so(
    w: Jobs, redis_server: RedisServer
) -> None:
    code, _, err = gq_cmd(w, redis_server, "purge", "--task", "t", queue="no_such_queue_ops")
    assert code == 1 and "queue no_such_queue_ops does not exist" in err


def test_gq_move_sends_jobs_to_another_queue(w: Jobs, redis_server: RedisServer) -> None:
    target = Jobs(w.client, w.q.keys.name + "-new")
    ready = [w.ready("app.t", i) for i in range(3)]
    died = w.dead("app.t", died=1000.0)
    try:
        code, out, err = gq_cmd(w, redis_server, "move", "--to", target.q.keys.name, "--yes")
        assert (code, out.strip()) == (0, "moved 4 job(s)"), err
        assert target.active() == ready and w.active() == []
        assert w.client.zscore(target.q.keys.dead, died) == 1000.0
    finally:
        delete_keys(w.client, f"{target.q.keys.name}*")


def test_gq_dead_retry_and_delete_take_the_filter_flags(w: Jobs, redis_server: RedisServer) -> None:
    fixed = [w.dead("app.a", i, error="KeyError: 'x'") for i in range(2)]
    other = w.dead("app.a", error="Timeout")
    gone = w.dead("app.b")
    code, out, _ = gq_cmd(
        w, redis_server, "dead", "retry", "--task", "app.a", "--error", "keyerror", "--dry-run"
    )
    assert out.strip() == "would retry 2 job(s) (dry run: nothing changed)" and w.active() == []
    code, out, _ = gq_cmd(
        w, redis_server, "dead", "retry", "--task", "app.a", "--error", "keyerror"
    )
    assert (code, out.strip()) == (0, "retried 2 job(s)") and sorted(w.active()) == sorted(fixed)
    code, out, _ = gq_cmd(w, redis_server, "dead", "delete", "--all", "--dry-run")
    assert (code, out.strip()) == (0, "would delete 2 job(s) (dry run: nothing changed)")
    code, out, _ = gq_cmd(w, redis_server, "dead", "delete", "--task", "app.b")
    assert (code, out.strip()) == (0, "deleted 1 job(s)") and not w.has_message(gone)
    assert [i.decode() for i in w.client.zrange(w.q.keys.dead, 0, -1)] == [other]


def test_gq_scheduled_reschedule_moves_the_matching_jobs(
    w: Jobs, redis_server: RedisServer
) -> None:
    stuck = w.scheduled("app.a", at=4e9)
    other = w.scheduled("app.b", at=4e9)
    code, out, err = gq_cmd(
        w, redis_server, "scheduled", "reschedule", "--in", "10m", "--task", "app.a"
    )
    assert (code, out.strip()) == (0, "rescheduled 1 job(s)"), err
    assert abs(w.client.zscore(w.q.keys.scheduled, stuck) - (time.time() + 600)) < 30
    assert w.client.zscore(w.q.keys.scheduled, other) == 4e9
    code, out, _ = gq_cmd(w, redis_server, "scheduled", "reschedule", "--at", "2000000000", "--yes")
    assert out.strip() == "rescheduled 2 job(s)"
    assert w.client.zscore(w.q.keys.scheduled, other) == 2e9
    code, out, _ = gq_cmd(w, redis_server, "scheduled", "run", "--task", "app.b")
    assert (code, out.strip()) == (0, "queued 1 job(s)") and w.active() == [other]
    code, out, _ = gq_cmd(w, redis_server, "scheduled", "run", stuck)
    assert (code, out.strip()) == (0, "queued 1 job(s)") and w.active() == [other, stuck]
