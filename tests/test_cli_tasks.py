"""Task jobs in the ``gq`` tool, run as a user runs it (subprocesses, a real redis-server):
``gq dead list`` / ``gq scheduled list`` show a task's name and arguments as text, and
``gq enqueue --task NAME --args JSON --kwargs JSON`` enqueues one that the app runs."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq import job as jobs
from gq.tasks import envelope
from tests.cli_support import ADMIN, env_for, run
from tests.dashboard_support import make_dead
from tests.helpers import RedisServer, delete_keys
from tests.queue_sides import BothSides


@pytest.fixture
def rq(redis_server: RedisServer) -> Iterator[BothSides]:
    name = f"test_cli_tasks_{uuid.uuid4().hex[:8]}"
    yield BothSides(redis_server.client(), name)
    delete_keys(redis_server.client(), f"{name}*")


def gq_cmd(rq: BothSides, server: RedisServer, *args: str) -> tuple[int, str, str]:
    result = run(ADMIN, *args, env=env_for(server.url, rq.keys.name))
    return result.returncode, result.stdout, result.stderr


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def queue_keys(rq: BothSides) -> list[bytes]:
    return list(rq.client.scan_iter(match=f"{rq.keys.name}*"))


# -- showing tasks ----------------------------------------------------------------------------


def test_dead_list_shows_a_task_as_a_call_and_a_byte_job_as_before(
    redis_server: RedisServer, rq: BothSides
) -> None:
    data = envelope.encode("hooks.deliver", ["https://a.example", {"n": 1}], {"tenant": "acme"})
    task_id, byte_id = make_dead(rq, [(data, "boom"), (b"plain", "e2")])
    code, out, err = gq_cmd(rq, redis_server, "dead", "list")
    assert code == 0, err
    [task_line] = [line for line in out.splitlines() if line.startswith(task_id)]
    assert "hooks.deliver('https://a.example', {'n': 1}, tenant='acme')" in task_line
    assert task_line.rstrip().endswith("boom")
    [byte_line] = [line for line in out.splitlines() if line.startswith(byte_id)]
    assert "'plain'" in byte_line
    code, out, err = gq_cmd(rq, redis_server, "dead", "list", "--json")
    entries = {e["id"]: e for e in json_lines(out)}
    assert entries[task_id]["task"] == {
        "name": "hooks.deliver",
        "args": ["'https://a.example'", "{'n': 1}"],
        "kwargs": {"tenant": "'acme'"},
        "opts": {},
        "headers": {},
    }
    assert base64.b64decode(entries[task_id]["data_base64"]) == data  # nothing lost
    assert entries[byte_id]["data"] == "plain" and "task" not in entries[byte_id]


def test_a_hostile_argument_cannot_reach_the_terminal_and_long_ones_are_cut(
    redis_server: RedisServer, rq: BothSides
) -> None:
    data = envelope.encode("t\x1b]0;pwned\x07", ["\x1b[2J\x1b[31m" + "y" * 500], {"b": b"\x00\xff"})
    make_dead(rq, [(data, "e")])
    code, out, err = gq_cmd(rq, redis_server, "dead", "list")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    line = out.splitlines()[1]
    assert "'t\\x1b]0;pwned\\x07'('\\x1b[2J\\x1b[31myyy" in line
    assert "y" * 60 not in line and "…" in line


def test_an_envelope_that_does_not_decode_is_listed_raw_with_a_note(
    redis_server: RedisServer, rq: BothSides
) -> None:
    bad = envelope.MAGIC + b"\xc1junk"
    [job_id] = make_dead(rq, [(bad, "e")])
    code, out, err = gq_cmd(rq, redis_server, "dead", "list")
    assert code == 0, err
    assert f"<{len(bad)} bytes> (undecodable task envelope)" in out
    [entry] = json_lines(gq_cmd(rq, redis_server, "dead", "list", "--json")[1])
    assert entry["id"] == job_id and base64.b64decode(entry["data_base64"]) == bad
    assert entry["data_problem"].startswith("task envelope does not decode: ")


def test_scheduled_list_shows_a_task_enqueued_through_the_app(
    redis_server: RedisServer, rq: BothSides
) -> None:
    app = gq.App(client=rq.client, queue=rq.keys.name)

    @app.task(name="mail.send", retries=2)
    def send(to: str, subject: str) -> None: ...

    result = send.using(after=3600, timeout=5).enqueue("ann@example.com", subject="hi")
    code, out, err = gq_cmd(rq, redis_server, "scheduled", "list")
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith(result.id)]
    assert "mail.send('ann@example.com', subject='hi')" in line
    [entry] = json_lines(gq_cmd(rq, redis_server, "scheduled", "list", "--json")[1])
    assert entry["task"]["opts"]["timeout"] == "5.0"


# -- gq enqueue --task ------------------------------------------------------------------------


def test_enqueue_task_builds_the_envelope_the_app_runs(
    redis_server: RedisServer, rq: BothSides
) -> None:
    code, out, err = gq_cmd(
        rq, redis_server, "enqueue", "--task", "hooks.deliver",
        "--args", '["https://a.example", {"event": "paid", "n": [1, 2.5, null, true]}]',
        "--kwargs", '{"tenant": "acme"}',
    )  # fmt: skip
    assert code == 0, err
    job_id = out.strip()
    [message] = rq.messages([job_id])
    assert message is not None
    job = jobs.decode(message)
    assert envelope.decode(job.data) == envelope.Envelope(
        "hooks.deliver",
        ["https://a.example", {"event": "paid", "n": [1, 2.5, None, True]}],
        {"tenant": "acme"},
        {},
        {},
    )
    app = gq.App(client=rq.client, queue=rq.keys.name)
    seen: list[tuple[str, dict[str, Any], str]] = []

    @app.task(name="hooks.deliver")
    def deliver(url: str, payload: dict[str, Any], tenant: str) -> int:
        seen.append((url, payload, tenant))
        return 200

    picked = gq.Job(id=job.id, data=job.data)
    picked.queue = rq.keys.name  # as the poller sets it
    plan = app.plan(picked)
    assert plan.run() == 200 and plan.task == "hooks.deliver"
    assert seen == [("https://a.example", {"event": "paid", "n": [1, 2.5, None, True]}, "acme")]


def test_enqueue_task_with_an_id_after_a_delay_and_no_arguments(
    redis_server: RedisServer, rq: BothSides
) -> None:
    code, out, err = gq_cmd(
        rq, redis_server, "enqueue", "--task", "reports.nightly", "--after", "5m", "--id", "r-1"
    )
    assert (code, out.strip()) == (0, "r-1"), err
    [(job_id, _, message)] = rq.scheduled_jobs(10)
    assert job_id == "r-1" and message is not None
    decoded = envelope.decode(jobs.decode(message).data)
    assert (decoded.task, decoded.args, decoded.kwargs) == ("reports.nightly", [], {})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "t", "--args", '{"a": 1}'], "a JSON object is not a JSON array"),
        (["--task", "t", "--args", "[1,"], "--args: not JSON"),
        (["--task", "t", "--kwargs", "[1]"], "a JSON array is not a JSON object"),
        (["--task", "t", "--kwargs", '"x"'], "a JSON string is not a JSON object"),
        (["--task", "t", "--args", "[18446744073709551616]"], "args[0] is the int"),
        (["--args", "[1]", "data"], "--args and --kwargs need --task NAME"),
        (["--task", "t", "some data"], "--task takes its arguments from --args/--kwargs"),
        (["--task", "", "--args", "[]"], "--task needs a task name"),
    ],
)
def test_enqueue_task_refuses_bad_input_with_exit_2_and_writes_nothing(
    redis_server: RedisServer, rq: BothSides, argv: list[str], message: str
) -> None:
    code, out, err = gq_cmd(rq, redis_server, "enqueue", *argv)
    assert code == 2 and out == ""
    assert message in err, err
    assert queue_keys(rq) == []
