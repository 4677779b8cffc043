"""Task jobs on the dashboard, over HTTP, on fakeredis and a real Redis: a task's name and
arguments as escaped text (dead, scheduled and job pages, and the JSON API), long values
cut, bytes shown safely, a byte job as before, and an envelope that does not decode shown
raw with a note."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

import gq
from gq import dashboard
from gq.tasks import envelope
from tests.dashboard_support import Http, make_dead, registered_queue, serving
from tests.helpers import Backend
from tests.queue_sides import BothSides

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def client(backend: Backend) -> redis.Redis:
    return backend.client()


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_dash_tasks") as queue:
        yield queue


@pytest.fixture
def http(client: redis.Redis) -> Iterator[Http]:
    with serving(dashboard.app(client=client)) as address:
        yield Http(address)


def path(rq: BothSides, suffix: str) -> str:
    return f"/queues/{rq.keys.name}{suffix}"


def api_jobs(http: Http, rq: BothSides, state: str) -> list[dict]:  # type: ignore[type-arg]
    return list(json.loads(http.get(f"/api/queues/{rq.keys.name}/{state}").body)["jobs"])


def test_a_dead_task_shows_its_name_and_arguments_escaped(http: Http, rq: BothSides) -> None:
    data = envelope.encode("hooks.deliver", ["https://a.example", {"e": HOSTILE}], {"n": 3})
    make_dead(rq, [(data, "boom"), (b"plain bytes", "e2")])
    body = http.get(path(rq, "/dead")).body
    assert '<span class="task-name" title="task">hooks.deliver</span>' in body
    assert "(&#39;https://a.example&#39;, {&#39;e&#39;: &#39;&lt;script&gt;alert(1)" in body
    assert "n=3)" in body
    assert "<script>alert" not in body
    assert "plain bytes" in body  # a byte job, shown as it always was
    [task_row] = [j for j in api_jobs(http, rq, "dead") if j["task"]]
    assert task_row["task"]["name"] == "hooks.deliver"
    assert task_row["task"]["args"] == ["'https://a.example'", f"{{'e': {HOSTILE!r}}}"]
    assert task_row["task"]["kwargs"] == {"n": "3"}
    assert task_row["text"] is None and task_row["hex"] is None


def test_a_scheduled_task_enqueued_through_the_app_shows_on_the_scheduled_page(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    app = gq.App(client=client, queue=rq.keys.name)

    @app.task(name="mail.send")
    def send(to: str, body: bytes) -> None: ...

    result = send.using(after=3600).enqueue("ann@example.com", b"\x00\xffhi")
    body = http.get(path(rq, "/scheduled")).body
    assert result.id in body
    assert "mail.send" in body
    assert "(&#39;ann@example.com&#39;, b&#39;\\x00\\xffhi&#39;)" in body


def test_a_long_argument_is_cut_in_the_list_and_longer_on_the_job_page(
    http: Http, rq: BothSides
) -> None:
    data = envelope.encode("t.long", ["x" * 3000 + "END"], {"who": "w"}, headers={"trace": "t1"})
    [job_id] = make_dead(rq, [(data, "e")])
    listed = http.get(path(rq, "/dead")).body
    assert "x" * 119 + "…" not in listed  # cut before the argument's 120th character
    assert "x" * 118 + "…" in listed and "END" not in listed
    assert f"/job?id={job_id}" in listed  # the link to see more
    page = http.get(path(rq, f"/job?id={job_id}")).body
    assert "x" * 3000 + "END" in page
    assert '<dt class="mono">who</dt><dd><pre class="data">&#39;w&#39;</pre></dd>' in page
    assert '<dt class="mono">trace</dt>' in page  # headers have their own list


def test_an_envelope_that_does_not_decode_shows_raw_with_a_note(http: Http, rq: BothSides) -> None:
    bad = envelope.MAGIC + b"\xc1<b>"
    [job_id] = make_dead(rq, [(bad, "e")])
    body = http.get(path(rq, "/dead")).body
    assert "task envelope does not decode: the envelope is not MessagePack" in body
    assert bad.hex(" ") in body
    assert "<b>" not in body
    [row] = api_jobs(http, rq, "dead")
    assert row["task"] is None and row["hex"] == bad.hex(" ")
    assert row["data_problem"].startswith("task envelope does not decode")
    page = http.get(path(rq, f"/job?id={job_id}")).body
    assert "task envelope does not decode" in page and bad.hex(" ") in page
