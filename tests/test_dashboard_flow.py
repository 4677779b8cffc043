"""Flow control on the dashboard (SPEC sections 9 and 10): the queue page shows whether the
queue is paused and its limits, and pauses or resumes it with a POST that needs the CSRF
token and is refused in read-only mode. Over HTTP on a real Redis, and once in a real
headless browser."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By

import gq
from gq import dashboard
from gq.dashboard.pages import name_segment
from tests.dashboard_support import Http, chromium, registered_queue, serving
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(90)

REGISTRY = "gq:queues"


@pytest.fixture
def client(redis_server: RedisServer) -> redis.Redis:
    return redis_server.client()


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_dash_flow") as queue:
        yield queue


@pytest.fixture
def queue(rq: BothSides) -> gq.Queue:
    return gq.Queue(rq.keys.name, client=rq.client)


@pytest.fixture
def http(client: redis.Redis) -> Iterator[Http]:
    with serving(dashboard.app(client=client)) as address:
        yield Http(address)


def path(rq: BothSides, suffix: str = "") -> str:
    return f"/queues/{name_segment(rq.keys.name)}{suffix}"


def flow_panel(body: str) -> str:
    start = body.index('<div class="flow')
    return body[start : body.index("</div>", start)]


# -- pause and resume -------------------------------------------------------------------------


def test_pause_and_resume_from_the_queue_page(http: Http, rq: BothSides, queue: gq.Queue) -> None:
    page = http.get(path(rq))
    panel = flow_panel(page.body)
    assert 'data-field="paused">Running<' in panel
    assert f'action="{path(rq, "/pause")}"' in panel and ">Pause</button>" in panel

    reply = http.post(path(rq, "/pause"), [("csrf_token", page.token)])
    assert reply.status == 303
    assert reply.headers["Location"] == path(rq) + "?done=paused"
    assert queue.paused
    after = http.get(reply.headers["Location"])
    panel = flow_panel(after.body)
    assert '<div class="flow paused"' in panel and ">Paused</span>" in panel
    assert f'action="{path(rq, "/resume")}"' in panel and ">Resume</button>" in panel
    assert "Queue paused" in after.body

    reply = http.post(path(rq, "/resume"), [("csrf_token", after.token)])
    assert reply.status == 303 and reply.headers["Location"].endswith("?done=resumed")
    assert not queue.paused
    assert ">Running<" in flow_panel(http.get(path(rq)).body)


def test_a_rate_limited_hold_shows_and_is_lifted_from_the_queue_page(
    http: Http, rq: BothSides, queue: gq.Queue
) -> None:
    rq.client.hset(rq.keys.flow, "hold_until", "inf")  # written before the cap of a day
    summary = json.loads(http.get(f"/api/queues/{name_segment(rq.keys.name)}").body)
    assert summary["held_back_seconds"] == 86400
    page = http.get(path(rq))
    panel = flow_panel(page.body)
    assert 'data-field="held_back"' in panel and 'data-action="lift-hold"' in panel
    reply = http.post(path(rq, "/resume"), [("csrf_token", page.token)])
    assert reply.status == 303
    assert queue.stats()["held_back_seconds"] == 0
    assert 'data-action="lift-hold"' not in flow_panel(http.get(path(rq)).body)


def test_a_queue_named_with_slashes_is_paused_by_its_own_name(
    http: Http, client: redis.Redis
) -> None:
    name = f"test_dash_flow/a/{uuid.uuid4().hex[:6]}"
    client.sadd(REGISTRY, name)
    try:
        rq = BothSides(client, name)
        gq.Producer(name, client=client).perform(b"x")
        reply = http.post(path(rq, "/pause"), [("csrf_token", http.get(path(rq)).token)])
        assert reply.status == 303
        assert gq.Queue(name, client=client).paused
        assert not gq.Queue("test_dash_flow/a", client=client).paused
    finally:
        client.srem(REGISTRY, name)
        delete_keys(client, "test_dash_flow/a*")


@pytest.mark.parametrize("forge", ["no token", "no cookie", "other token", "cross-site"])
@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_post_without_a_valid_csrf_token_is_refused_and_changes_nothing(
    http: Http, rq: BothSides, queue: gq.Queue, forge: str, verb: str
) -> None:
    if verb == "resume":
        queue.pause()
    fields = [("csrf_token", http.get(path(rq)).token)]
    headers = {}
    if forge == "no token":
        fields = []
    elif forge == "no cookie":
        http.cookies.clear()
    elif forge == "other token":  # a valid token of another session
        fields = [("csrf_token", Http(http.address).get(path(rq)).token)]
    else:
        headers["Sec_Fetch_Site"] = "cross-site"
    reply = http.post(path(rq, f"/{verb}"), fields, **headers)
    assert reply.status == 403
    assert queue.paused == (verb == "resume")


def test_a_get_cannot_pause(http: Http, rq: BothSides, queue: gq.Queue) -> None:
    gq.Producer(rq.keys.name, client=rq.client).perform(b"x")
    assert http.get(path(rq, "/pause")).status == 405
    assert not queue.paused


def test_read_only_shows_the_state_without_buttons_and_refuses_both(
    client: redis.Redis, rq: BothSides, queue: gq.Queue
) -> None:
    gq.Producer(rq.keys.name, client=client).perform(b"x")
    with serving(dashboard.app(client=client, read_only=True)) as address:
        http = Http(address)
        body = http.get(path(rq)).body
        assert "<form" not in body and "<button" not in body
        assert ">Running<" in flow_panel(body)
        token = http.cookies["gq_csrf"]  # what a page would carry, had it a form
        refused = http.post(path(rq, "/pause"), [("csrf_token", token)])
        assert refused.status == 403 and not queue.paused
        queue.pause()
        assert ">Paused</span>" in flow_panel(http.get(path(rq)).body)
        refused = http.post(path(rq, "/resume"), [("csrf_token", token)])
        assert refused.status == 403 and queue.paused


# -- what the page and the API show -----------------------------------------------------------


def test_the_queue_page_and_api_show_the_limits_and_the_jobs_held(
    http: Http, rq: BothSides, queue: gq.Queue
) -> None:
    text = " ".join(flow_panel(http.get(path(rq)).body).split())
    assert "Rate limit</span> none" in text and "Concurrency limit</span> none" in text
    gq.Producer(rq.keys.name, client=rq.client).perform_many([b"a", b"b"])
    rq.register("worker-a")
    assert len(rq.fetch("worker-a", 2)) == 2  # two jobs held by a gq consumer
    queue.set_limits(rate=(100, 0.5), concurrency=20)
    queue.pause()
    text = " ".join(flow_panel(http.get(path(rq)).body).split())
    assert 'data-field="rate_limit"><span class="label">Rate limit</span> 100 per 0.5s' in text
    assert 'data-field="concurrency_limit"><span class="label">Concurrency limit</span> 20' in text
    assert 'data-field="held"><span class="label">Held now</span> 2' in text
    assert 'data-field="held_back"' not in text

    api = json.loads(http.get(f"/api{path(rq)}").body)
    assert api["name"] == rq.keys.name
    assert {k: api[k] for k in ("paused", "rate_limit", "concurrency_limit", "held")} == {
        "paused": True,
        "rate_limit": {"jobs": 100, "per": 0.5},
        "concurrency_limit": 20,
        "held": 2,
    }
    assert api["held_back_seconds"] == 0


def test_a_queue_held_back_by_rate_limited_says_for_how_long(
    http: Http, rq: BothSides, client: redis.Redis
) -> None:
    gq.Producer(rq.keys.name, client=client).perform(b"x")
    # What retry.lua writes when a handler raises RateLimited(after=90).
    seconds, micros = client.time()
    client.hset(rq.keys.flow, "hold_until", seconds * 1000 + micros // 1000 + 90_000)
    text = " ".join(flow_panel(http.get(path(rq)).body).split())
    assert 'data-field="held_back"' in text
    assert "Held back</span> 1m29s more" in text or "Held back</span> 1m30s more" in text
    assert 85 < json.loads(http.get(f"/api{path(rq)}").body)["held_back_seconds"] <= 90


# -- in a real browser ---------------------------------------------------------------------------


@pytest.fixture
def browser(tmp_path: Any) -> Iterator[Any]:
    driver = chromium(tmp_path)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def flash(browser: Any) -> str:
    """The flash message's text; "" while there is none or the page is being replaced."""
    try:
        return str(browser.find_element(By.CSS_SELECTOR, ".flash").text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_clicking_pause_then_resume_in_a_browser(
    browser: Any, rq: BothSides, queue: gq.Queue, client: redis.Redis
) -> None:
    gq.Producer(rq.keys.name, client=client).perform(b"x")
    # No live refresh: the panel is not swapped under the click.
    with serving(dashboard.app(client=client, refresh=0)) as address:
        browser.get(f"http://{address}{path(rq)}")
        state = browser.find_element(By.CSS_SELECTOR, '#flow [data-field="paused"]')
        assert state.text == "Running"
        browser.find_element(By.XPATH, "//div[@id='flow']//button[text()='Pause']").click()
        wait_until(lambda: "paused" in flash(browser), 10, message="the page after Pause")
        assert queue.paused
        state = browser.find_element(By.CSS_SELECTOR, '#flow [data-field="paused"]')
        assert state.text.lower() == "paused" and state.is_displayed()
        assert "paused" in browser.find_element(By.ID, "flow").get_attribute("class").split()

        browser.find_element(By.XPATH, "//div[@id='flow']//button[text()='Resume']").click()
        wait_until(lambda: "resumed" in flash(browser), 10, message="the page after Resume")
        assert not queue.paused
        state = browser.find_element(By.CSS_SELECTOR, '#flow [data-field="paused"]')
        assert state.text == "Running"
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
