"""The dashboard over HTTP, on a real Redis: every page and every change, as a client
sends them, with the effect of each change checked in Redis."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator

import gevent
import pytest
import redis

import gq
from gq import dashboard
from tests.dashboard_support import (
    Http,
    make_dead,
    registered_queue,
    serving,
    write_facts,
    write_history,
)
from tests.helpers import NO_RETRY, RedisServer, delete_keys, free_port, wait_until
from tests.queue_sides import BothSides

REGISTRY = "gq:queues"
XSS_DATA = b"<script>alert(1)</script>"
XSS_ERROR = "<img src=x onerror=alert(2)>"


@pytest.fixture
def client(redis_server: RedisServer) -> redis.Redis:
    return redis_server.client()


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_dash") as queue:
        yield queue


@pytest.fixture
def http(client: redis.Redis) -> Iterator[Http]:
    with serving(dashboard.app(client=client)) as address:
        yield Http(address)


def path(rq: BothSides, suffix: str = "") -> str:
    return f"/queues/{rq.keys.name}{suffix}"


def active(rq: BothSides) -> list[str]:
    return [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)]


def dead_ids(rq: BothSides) -> set[str]:
    return {i.decode() for i in rq.client.zrange(rq.keys.dead, 0, -1)}


def cells(body: str, queue: str) -> dict[str, str]:
    """The data-field cells of the queues page's row for ``queue``."""
    import re

    row = body[body.index(f'data-queue="{queue}"') :]
    row = row[: row.index("</tr>")]
    return {
        name: re.sub(r"<[^>]+>", "", value).strip()
        for name, value in re.findall(r'data-field="(\w+)">(.*?)</td>', row, re.S)
    }


# -- pages ---------------------------------------------------------------------------------


def test_queues_page_lists_registered_queues_with_their_counts(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    make_dead(rq, [(b"x", "boom")])
    producer = gq.Producer(rq.keys.name, client=client)
    producer.perform_many([b"1", b"2", b"3"])
    producer.perform_after(3600, b"later")
    reply = http.get("/")
    assert reply.status == 200
    assert cells(reply.body, rq.keys.name) == {
        "ready": "3", "in_flight": "0", "scheduled": "1", "dead": "1", "consumers_alive": "0",
    }  # fmt: skip
    assert f'href="/queues/{rq.keys.name}"' in reply.body


def test_a_queue_outside_the_registry_is_not_found_by_scanning_keys(
    http: Http, client: redis.Redis
) -> None:
    hidden = f"test_dash_hidden_{uuid.uuid4().hex[:8]}"
    try:
        gq.Producer(hidden, client=client).perform(b"x")
        assert hidden not in http.get("/").body  # no KEYS/SCAN: only the registry
        assert http.get(f"/queues/{hidden}").status == 200  # but it exists, so it opens
    finally:
        delete_keys(client, f"{hidden}*")


def test_queues_named_on_the_command_line_are_listed(client: redis.Redis) -> None:
    name = f"test_dash_named_{uuid.uuid4().hex[:8]}"
    with serving(dashboard.app(client=client, queues=[name])) as address:
        body = Http(address).get("/").body
    assert f'data-queue="{name}"' in body


def test_an_unknown_queue_is_404_and_its_name_is_not_shown(http: Http) -> None:
    reply = http.get("/queues/no_such_queue_%3Cb%3Emark%3C%2Fb%3E")
    assert reply.status == 404
    assert "<b>mark" not in reply.body and "mark" not in reply.body
    api = http.get("/api/queues/no_such_queue_mark")
    assert api.status == 404 and json.loads(api.body) == {"error": "No such queue."}


def test_queue_page_shows_counts_oldest_age_and_consumers_with_their_facts(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    gq.Producer(rq.keys.name, client=client).perform(b"waiting")
    with_facts, without = str(uuid.uuid4()), str(uuid.uuid4())
    rq.register(with_facts)
    rq.register(without)
    write_facts(client, rq.keys.name, with_facts)
    body = http.get(path(rq)).body
    assert 'data-field="ready">1<' in body
    assert "oldest waiting 0s" in body or "oldest waiting 1s" in body
    assert with_facts[:8] in body and without[:8] in body
    for shown in ("worker-7", "4242", "7 / 50", "150.0 MB", "37.5%", "1h02m", gq.__version__):
        assert shown in body, shown
    assert "12\u202f345" in body  # jobs done
    # Retries apart from the jobs that went to dead, not one "failed" figure (issue 32).
    assert 'data-field="jobs_retried">30<' in body and 'data-field="jobs_dead">12<' in body
    assert "<th>Retried</th><th>Dead</th>" in body and "<th>Failed</th>" not in body
    assert "the consumer wrote no facts" in body


def test_consumer_facts_of_the_wrong_type_are_left_out(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    consumer = str(uuid.uuid4())
    rq.register(consumer)
    write_facts(client, rq.keys.name, consumer, host="<b>h</b>", pid="not a number", rss_bytes=None)
    body = http.get(path(rq, "/consumers")).body
    assert "&lt;b&gt;h&lt;/b&gt;" in body and "<b>h</b>" not in body
    assert "not a number" not in body
    reply = json.loads(http.get(f"/api/queues/{rq.keys.name}/consumers").body)
    assert reply["consumers"][0]["facts"]["pid"] is None


def test_a_silent_consumer_shows_as_dead(http: Http, rq: BothSides) -> None:
    rq.client.zadd(rq.keys.consumers, {rq.keys.inflight("gone"): time.time() - 3600})
    row = http.get(path(rq, "/consumers")).body
    assert '<tr class="dead" data-consumer="gone">' in row and "silent for 1h00m" in row
    summary = json.loads(http.get(f"/api/queues/{rq.keys.name}").body)
    assert (summary["consumers_alive"], summary["consumers_dead"]) == (0, 1)


def test_the_chart_and_the_history_api_show_the_last_hour(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    now = rq.server_time()
    this_minute = int(now // 60) * 60
    write_history(
        client,
        rq.keys.name,
        {
            this_minute: (40, 5, 3),  # 3 retries and 2 jobs that went to dead
            this_minute - 60: (10, 0),
            this_minute - 59 * 60: (5, 5),
            this_minute - 61 * 60: (999, 999),
        },  # fmt: skip
    )
    history = json.loads(http.get(f"/api/queues/{rq.keys.name}/history").body)["history"]
    assert len(history) == 60
    assert history[-1] == {
        "minute": this_minute, "done": 40, "failed": 5, "retried": 3, "dead": 2,
    }  # fmt: skip
    assert history[-2]["done"] == 10 and history[0] == {
        "minute": this_minute - 59 * 60, "done": 5, "failed": 5, "retried": 0, "dead": 5,
    }  # fmt: skip
    assert sum(p["done"] for p in history) == 55  # the 61st minute back is out of the hour
    body = http.get(path(rq)).body
    # Issue 32: a retry is drawn as a retry, not as a failure.
    assert "done 55" in body and "retried 3" in body and "dead 7" in body
    assert 'polyline class="retried"' in body and "failed" not in body.split("<h2>Consumers")[0]
    assert ">50</text>" in body  # the axis: the nice ceiling above 40


def test_dead_page_shows_data_and_errors_as_text_and_binary_as_hex(
    http: Http, rq: BothSides
) -> None:
    make_dead(rq, [(XSS_DATA, XSS_ERROR), (b"\xff\xfe\x00ok", "bin")])
    body = http.get(path(rq, "/dead")).body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    assert "&lt;img src=x onerror=alert(2)&gt;" in body and "<img" not in body
    assert "ff fe 00 6f 6b" in body
    jobs_json = json.loads(http.get(f"/api/queues/{rq.keys.name}/dead").body)["jobs"]
    assert {j["text"] for j in jobs_json} == {XSS_DATA.decode(), None}
    assert {j["hex"] for j in jobs_json} == {None, "ff fe 00 6f 6b"}


def test_dead_page_is_paged_newest_first(http: Http, rq: BothSides) -> None:
    ids = make_dead(rq, [(f"job {i}".encode(), "e") for i in range(5)])
    for i, job_id in enumerate(ids):  # kill times 1 s apart, the last killed newest
        rq.client.zadd(rq.keys.dead, {job_id: 1000 + i})
    first = http.get(path(rq, "/dead?per=2")).body
    last = http.get(path(rq, "/dead?per=2&page=3")).body
    assert ids[4] in first and ids[3] in first and ids[2] not in first
    assert ids[0] in last and ids[1] not in last
    assert "page 3 of 3" in last
    assert http.get(path(rq, "/dead?per=99999&page=-4")).status == 200  # clamped


def test_a_long_job_is_cut_in_the_list_and_whole_on_its_own_page(http: Http, rq: BothSides) -> None:
    [job_id] = make_dead(rq, [(b"a" * 3000 + b"END", "e")])
    assert "END" not in http.get(path(rq, "/dead")).body
    page = http.get(path(rq, f"/job?id={job_id}"))
    assert page.status == 200 and "a" * 3000 + "END" in page.body
    assert http.get(path(rq, "/job?id=nope")).status == 404


def test_scheduled_page_lists_jobs_soonest_first(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    producer = gq.Producer(rq.keys.name, client=client)
    later = producer.perform_after(7200, b"later")
    soon = producer.perform_after(60, b"soon")
    body = http.get(path(rq, "/scheduled")).body
    assert body.index(soon) < body.index(later)
    assert "in 59s" in body or "in 1m00s" in body


# -- changes -------------------------------------------------------------------------------


def post(http: Http, rq: BothSides, page: str, action: str, fields: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    token = http.get(path(rq, page)).token
    return http.post(path(rq, f"{page}/{action}"), [("csrf_token", token), *fields])


def test_retry_one_dead_job_moves_it_to_the_queue(http: Http, rq: BothSides) -> None:
    first, second = make_dead(rq, [(b"a", "e"), (b"b", "e")])
    reply = post(http, rq, "/dead", "retry", [("id", first)])
    assert reply.status == 303
    assert reply.headers["Location"] == path(rq, "/dead") + "?done=retried&n=1"
    assert active(rq) == [first] and dead_ids(rq) == {second}
    assert "1 job(s) queued again." in http.get(reply.headers["Location"]).body


def test_retry_and_delete_selected_and_all(http: Http, rq: BothSides) -> None:
    ids = make_dead(rq, [(f"{i}".encode(), "e") for i in range(6)])
    post(http, rq, "/dead", "delete", [("id", ids[0]), ("id", ids[1])])
    assert dead_ids(rq) == set(ids[2:]) and rq.messages(ids[:2]) == [None, None]
    post(http, rq, "/dead", "retry", [("id", ids[2]), ("id", ids[3])])
    assert active(rq) == [ids[2], ids[3]]
    post(http, rq, "/dead", "retry", [("all", "1")])
    assert dead_ids(rq) == set() and active(rq)[2:] == [ids[5], ids[4]][::-1]


def test_delete_all_dead(http: Http, rq: BothSides) -> None:
    ids = make_dead(rq, [(b"a", "e"), (b"b", "e")])
    reply = post(http, rq, "/dead", "delete", [("all", "1")])
    assert reply.headers["Location"].endswith("?done=deleted&n=2")
    assert dead_ids(rq) == set() and rq.messages(ids) == [None, None]


def test_a_post_without_a_selection_changes_nothing(http: Http, rq: BothSides) -> None:
    make_dead(rq, [(b"a", "e")])
    reply = post(http, rq, "/dead", "retry", [])
    assert reply.headers["Location"].endswith("?done=none")
    assert len(dead_ids(rq)) == 1


def test_run_a_scheduled_job_now_and_delete_another(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    producer = gq.Producer(rq.keys.name, client=client)
    run, gone, stays = (producer.perform_after(3600, d) for d in (b"run", b"gone", b"stays"))
    assert post(http, rq, "/scheduled", "run", [("id", run)]).status == 303
    assert active(rq) == [run]
    post(http, rq, "/scheduled", "delete", [("id", gone)])
    assert [e[0] for e in rq.scheduled_jobs(10)] == [stays] and rq.messages([gone]) == [None]
    post(http, rq, "/scheduled", "run", [("all", "1")])
    assert active(rq) == [run, stays] and rq.counts()["scheduled"] == 0


# -- security ------------------------------------------------------------------------------


def test_every_response_carries_the_security_headers(http: Http, rq: BothSides) -> None:
    for url in ("/", path(rq), "/api/queues", "/static/dashboard.js", "/nope"):
        headers = http.get(url).headers
        assert "script-src 'self'" in headers["Content-Security-Policy"], url
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], url
        assert headers["X-Content-Type-Options"] == "nosniff", url
        assert headers["X-Frame-Options"] == "DENY", url


def test_the_pages_carry_no_inline_script_or_style(http: Http, rq: BothSides) -> None:
    make_dead(rq, [(b"x", "e")])
    for url in ("/", path(rq), path(rq, "/dead"), path(rq, "/scheduled"), path(rq, "/consumers")):
        body = http.get(url).body
        assert "<script>" not in body and "style=" not in body and "<style" not in body, url
        assert "onclick" not in body and "javascript:" not in body, url


def test_csrf_cookie_is_http_only_strict_and_scoped(http: Http, rq: BothSides) -> None:
    cookie = http.get("/").headers["Set-Cookie"]
    assert cookie.startswith("gq_csrf=") and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Path=/;" in cookie + ";"


@pytest.mark.parametrize(
    "forge",
    ["no token", "no cookie", "other token", "foreign secret", "cross-site"],
)
def test_a_post_without_a_valid_csrf_token_is_refused_and_changes_nothing(
    http: Http, rq: BothSides, forge: str
) -> None:
    [job_id] = make_dead(rq, [(b"a", "e")])
    token = http.get(path(rq, "/dead")).token
    fields, headers = [("id", job_id), ("csrf_token", token)], {}
    if forge == "no token":
        fields = fields[:1]
    elif forge == "no cookie":
        http.cookies.clear()
    elif forge == "other token":  # a valid token of another session
        fields[1] = ("csrf_token", Http(http.address).get(path(rq, "/dead")).token)
    elif forge == "foreign secret":  # cookie and field equal, signed with another secret
        forged = dashboard.app(client=rq.client).csrf.new_token()
        http.cookies["gq_csrf"] = forged
        fields[1] = ("csrf_token", forged)
    else:
        headers["Sec_Fetch_Site"] = "cross-site"
    reply = http.post(path(rq, "/dead/retry"), fields, **headers)
    assert reply.status == 403
    assert dead_ids(rq) == {job_id} and active(rq) == []


def test_a_get_cannot_change_anything(http: Http, rq: BothSides) -> None:
    [job_id] = make_dead(rq, [(b"a", "e")])
    assert http.get(path(rq, f"/dead/retry?id={job_id}")).status == 405
    assert dead_ids(rq) == {job_id}


def test_read_only_hides_every_button_and_refuses_every_change(
    client: redis.Redis, rq: BothSides
) -> None:
    [job_id] = make_dead(rq, [(b"a", "e")])
    gq.Producer(rq.keys.name, client=client).perform_after(3600, b"s")
    with serving(dashboard.app(client=client, read_only=True)) as address:
        http = Http(address)
        for page in ("/dead", "/scheduled", "", "/consumers"):
            body = http.get(path(rq, page)).body
            assert "<form" not in body and "<button" not in body, page
        assert "read-only" in http.get("/").body
        token = http.get(path(rq, "/dead")).token if "csrf_token" in body else "x"
        reply = http.post(path(rq, "/dead/retry"), [("id", job_id), ("csrf_token", token)])
    assert reply.status == 403
    assert dead_ids(rq) == {job_id}


def test_basic_auth_is_required_when_configured(client: redis.Redis, rq: BothSides) -> None:
    app = dashboard.app(client=client, auth="admin:s3cret:with-colon")
    with serving(app) as address:
        http = Http(address)
        refused = http.get("/")
        assert refused.status == 401 and refused.headers["WWW-Authenticate"].startswith("Basic")
        assert "s3cret" not in refused.body
        assert http.get("/healthz").status == 200  # open, for load balancers
        for bad in ("admin:wrong", "Admin:s3cret:with-colon", "admin:"):
            http.auth = "Basic " + base64.b64encode(bad.encode()).decode()
            assert http.get("/").status == 401, bad
        http.auth = "Basic " + base64.b64encode(b"admin:s3cret:with-colon").decode()
        page = http.get(path(rq))
        assert page.status == 200 and "s3cret" not in page.body
        assert http.get("/api/queues").status == 200


def test_basic_auth_from_the_environment(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GQ_DASHBOARD_AUTH", "u:p")
    with serving(dashboard.app(client=client)) as address:
        assert Http(address).get("/").status == 401


def test_a_foreign_host_header_is_refused_when_hosts_are_limited(client: redis.Redis) -> None:
    app = dashboard.app(client=client, allowed_hosts=["localhost", "127.0.0.1"])
    with serving(app) as address:
        http = Http(address)
        assert http.get("/").status == 200
        assert http.get("/", Host="rebound.example:8080").status == 400


def test_mounted_under_a_prefix_every_link_and_form_uses_it(
    client: redis.Redis, rq: BothSides
) -> None:
    [job_id] = make_dead(rq, [(b"a", "e")])
    with serving(dashboard.app(client=client), prefix="/admin/gq") as address:
        http = Http(address)
        index = http.get("/admin/gq/")
        assert 'href="/admin/gq/static/dashboard.css"' in index.body
        assert f'href="/admin/gq/queues/{rq.keys.name}"' in index.body
        assert "Path=/admin/gq/" in index.headers["Set-Cookie"]
        page = http.get(f"/admin/gq/queues/{rq.keys.name}/dead")
        assert f'action="/admin/gq/queues/{rq.keys.name}/dead/retry"' in page.body
        reply = http.post(
            f"/admin/gq/queues/{rq.keys.name}/dead/retry",
            [("id", job_id), ("csrf_token", page.token)],
        )
        assert reply.headers["Location"].startswith(f"/admin/gq/queues/{rq.keys.name}/dead?")
    assert active(rq) == [job_id]


def test_a_queue_name_with_markup_and_slashes_is_escaped_and_reachable(
    http: Http, client: redis.Redis
) -> None:
    name = f"q/<img/src=x/onerror=alert(3)>{uuid.uuid4().hex[:6]}"
    client.sadd(REGISTRY, name)
    try:
        rq = BothSides(client, name)
        make_dead(rq, [(b"a", "e")])
        body = http.get("/").body
        assert "<img/src" not in body and "&lt;img/src=x/onerror=alert(3)&gt;" in body
        from gq.dashboard.pages import name_segment

        dead = http.get(f"/queues/{name_segment(name)}/dead")
        assert dead.status == 200 and "<img/src" not in dead.body and "a</pre>" in dead.body
    finally:
        client.srem(REGISTRY, name)
        delete_keys(client, "q/<img*")


def test_healthz_says_when_redis_is_gone() -> None:
    gone = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=NO_RETRY)
    with serving(dashboard.app(client=gone)) as address:
        http = Http(address)
        assert http.get("/healthz").status == 503
        failed = http.get("/")
        assert failed.status == 500 and "Traceback" not in failed.body


# -- with a real consumer ------------------------------------------------------------------


def test_a_running_consumer_shows_up_and_the_queue_drains(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    done: list[str] = []
    consumer = gq.Consumer(rq.keys.name, client=client, processor_concurrency=2)
    runner = gevent.spawn(consumer.run, lambda job: done.append(job.id))
    try:
        ids = gq.Producer(rq.keys.name, client=client).perform_many([b"1", b"2", b"3"])
        wait_until(lambda: len(done) == 3, 10, message="the consumer ran the jobs")
        summary = json.loads(http.get(f"/api/queues/{rq.keys.name}").body)
        assert summary["ready"] == 0 and summary["consumers_alive"] == 1
        assert [c["id"] for c in summary["consumers"]] == [consumer.id]
        assert consumer.id[:8] in http.get(path(rq)).body
        assert sorted(done) == sorted(ids)
    finally:
        consumer.stop()
        runner.join(timeout=10)


def test_metrics_serves_the_queue_gauges_behind_the_same_auth(client: redis.Redis) -> None:
    queue = f"dash-metrics-{uuid.uuid4().hex[:6]}"
    try:
        gq.Producer(queue, client=client).perform_many([b"a", b"b"])
        app = dashboard.app(client=client, queues=[queue], auth="ops:pw")
        with serving(app) as address:
            http = Http(address)
            assert http.get("/metrics").status == 401
            http.auth = "Basic " + base64.b64encode(b"ops:pw").decode()
            scraped = http.get("/metrics")
        assert scraped.status == 200 and scraped.headers["Content-Type"].startswith("text/plain")
        assert f'gq_queue_jobs{{queue="{queue}",state="ready"}} 2.0' in scraped.body
    finally:
        delete_keys(client, f"{queue}*")
