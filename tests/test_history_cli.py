"""``gq history`` as a user runs it: a subprocess against a real redis-server, its table,
its JSON, its cursor, its bounds (--set-max, --set-ttl), bad input (exit 2) and an
unknown queue (exit 1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

import gq
from tests.bulk_support import Jobs
from tests.cli_support import ADMIN, env_for, run
from tests.helpers import RedisServer, delete_keys

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def w(redis_server: RedisServer) -> Iterator[Jobs]:
    name = f"test_hist_{uuid.uuid4().hex[:8]}"
    yield Jobs(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")


def gq_cmd(
    w: Jobs, server: RedisServer, *args: str, queue: str | None = None
) -> tuple[int, str, str]:
    result = run(ADMIN, *args, env=env_for(server.url, queue or w.q.keys.name), input=b"")
    return result.returncode, result.stdout, result.stderr


def finish(w: Jobs, *ids: str) -> None:
    w.q.register("cli-test")
    taken = [job_id for job_id, _ in w.q.fetch("cli-test", len(ids))]
    assert sorted(taken) == sorted(ids) and all(w.q.ack("cli-test", taken))


def test_gq_history_lists_finished_jobs_as_a_table_and_json(
    w: Jobs, redis_server: RedisServer
) -> None:
    sent = w.ready("app.send", "a@x", tenant="acme")
    other = w.ready("app.other", 3)
    finish(w, sent, other)
    code, out, err = gq_cmd(w, redis_server, "history", "--task", "app.send")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:5] == ["ID", "STATE", "TASK", "ARGS", "ATTEMPTS"]
    assert "DURATION" in header and row.startswith(sent) and " done " in row
    code, out, err = gq_cmd(w, redis_server, "history", "--json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)}
    assert set(rows) == {sent, other}
    assert rows[sent]["task"] == "app.send" and rows[sent]["state"] == "done"
    assert (rows[sent]["args"], rows[sent]["kwargs"]) == (["a@x"], {"tenant": "acme"})
    assert "tenant='acme'" in rows[sent]["args_text"] and rows[sent]["attempts"] == 1
    assert {"enqueued_at", "started_at", "finished_at", "duration"} <= set(rows[sent])
    code, out, err = gq_cmd(w, redis_server, "jobs", "--state", "finished", "--json")
    assert code == 0, err
    assert {r["id"]: r["state"] for r in json.loads(out)} == {sent: "done", other: "done"}
    code, out, err = gq_cmd(w, redis_server, "history", "--limit", "1")
    assert code == 0 and "--cursor" in err
    cursor = err.split("--cursor '")[1].split("'")[0]
    code, out2, _ = gq_cmd(w, redis_server, "history", "--limit", "1", "--cursor", cursor)
    assert code == 0 and out2.splitlines()[1].split()[0] != out.splitlines()[1].split()[0]


def test_gq_history_bounds_bad_input_and_unknown_queue(w: Jobs, redis_server: RedisServer) -> None:
    code, out, err = gq_cmd(w, redis_server, "history", "--set-max", "3", "--set-ttl", "2h")
    assert code == 0, err
    assert "at most 3 entries, for 7200 s" in out
    assert gq.Queue(w.q.keys.name, client=redis_server.client()).history_settings() == (3, 7200)
    code, _, err = gq_cmd(w, redis_server, "history", "--set-max", "-1")
    assert code == 2 and "count >= 0" in err
    code, _, err = gq_cmd(w, redis_server, "history", "--state", "ready")
    assert code == 2 and "not in the history" in err
    code, _, err = gq_cmd(w, redis_server, "history", "--cursor", "abc")
    assert code == 2 and "cursor" in err
    code, _, err = gq_cmd(w, redis_server, "history", "--older-than", "soon")
    assert code == 2 and "invalid duration" in err
    code, _, err = gq_cmd(w, redis_server, "history", queue=f"nope_{uuid.uuid4().hex[:6]}")
    assert code == 1 and "does not exist" in err
