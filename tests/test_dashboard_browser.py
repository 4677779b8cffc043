"""The dashboard in a real headless browser (Debian's chromium driven by Selenium): what a
person sees and clicks, with the effect checked in Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import gevent.pywsgi
import pytest
import redis
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.by import By

import gq
from gq import dashboard
from tests.dashboard_support import make_dead, registered_queue, serving
from tests.helpers import delete_keys, wait_until
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(90)

REGISTRY = "gq:queues"
# Each payload sets a marker if it ever runs; the page must show it as text instead.
PAYLOADS = [
    (b"<script>alert(1)</script>", "<img src=x onerror=alert(2)>"),  # would open a dialog
    (b"<script>window.__xss = 1</script>", '<img src=x onerror="window.__xss = 2">'),
    (b'"><svg onload="window.__xss = 3">', "</textarea><script>window.__xss = 4</script>"),
    (b"\xff\xfe<script>window.__xss = 5</script>", "not UTF-8"),
]


DASHBOARD_OPTIONS = {"refresh": 2}  # (tests/browser_fixtures.py site)


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_browser") as queue:
        yield queue


def no_dialog(browser: Any) -> bool:
    try:
        browser.switch_to.alert  # noqa: B018 (reading it raises when there is none)
    except NoAlertPresentException:
        return True
    return False


def severe_logs(browser: Any) -> list[str]:
    """Console errors, such as a Content-Security-Policy violation."""
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def field(browser: Any, queue: str, name: str) -> str:
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-queue="{queue}"]')
    return str(row.find_element(By.CSS_SELECTOR, f'[data-field="{name}"]').text)


def test_the_queues_page_lists_a_queue_with_the_right_counts(
    browser: Any, site: str, rq: BothSides, client: redis.Redis
) -> None:
    make_dead(rq, [(b"x", "boom")])
    producer = gq.Producer(rq.keys.name, client=client)
    producer.perform_many([b"1", b"2", b"3"])
    producer.perform_after(600, b"later")
    browser.get(site + "/")
    assert field(browser, rq.keys.name, "ready") == "3"
    assert field(browser, rq.keys.name, "scheduled") == "1"
    assert field(browser, rq.keys.name, "dead") == "1"
    browser.find_element(By.LINK_TEXT, rq.keys.name).click()
    assert browser.find_element(By.CSS_SELECTOR, ".queue-title .name").text == rq.keys.name
    assert severe_logs(browser) == []


def test_retrying_a_dead_job_moves_it_back_to_ready_and_the_page_shows_it(
    browser: Any, site: str, rq: BothSides
) -> None:
    keep, retry = make_dead(rq, [(b"keep me", "e1"), (b"retry me", "e2")])
    browser.get(f"{site}/queues/{rq.keys.name}/dead")
    row = browser.find_element(By.XPATH, f"//tr[td[text()='{retry}']]")
    row.find_element(By.XPATH, ".//button[text()='Retry']").click()
    flash = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".flash"), 10)
    assert flash[0].text == "1 job(s) queued again."
    assert retry not in browser.page_source and keep in browser.page_source
    assert [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)] == [retry]
    browser.find_element(By.LINK_TEXT, "Overview").click()
    ready = browser.find_element(By.CSS_SELECTOR, '[data-field="ready"]')
    assert ready.text == "1"


def test_select_and_delete_through_the_bulk_buttons(browser: Any, site: str, rq: BothSides) -> None:
    ids = make_dead(rq, [(b"a", "e"), (b"b", "e"), (b"c", "e")])
    browser.get(f"{site}/queues/{rq.keys.name}/dead")
    delete = browser.find_element(By.XPATH, "//button[text()='Delete selected']")
    assert not delete.is_enabled()  # nothing selected yet
    for job_id in ids[:2]:
        browser.find_element(By.CSS_SELECTOR, f'input[name="id"][value="{job_id}"]').click()
    delete.click()
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".flash"), 10)
    assert {i.decode() for i in rq.client.zrange(rq.keys.dead, 0, -1)} == {ids[2]}


def test_job_data_and_errors_with_markup_show_as_text_and_run_nothing(
    browser: Any, site: str, rq: BothSides
) -> None:
    make_dead(rq, PAYLOADS)
    for page in ("/dead", ""):
        browser.get(f"{site}/queues/{rq.keys.name}{page}")
        assert no_dialog(browser)
        assert browser.execute_script("return window.__xss") is None
    browser.get(f"{site}/queues/{rq.keys.name}/dead")
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "pre.data, pre.error")]
    for data, error in PAYLOADS[:3]:
        assert data.decode() in texts and error in texts
    assert "ff fe 3c 73 63 72 69 70 74 3e" in " ".join(texts)  # not UTF-8: hex
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img, main svg textarea") == []
    assert severe_logs(browser) == []


def test_a_queue_named_with_markup_shows_as_text(
    browser: Any, site: str, client: redis.Redis
) -> None:
    name = f"<img/src=x/onerror=window.__xss=6>{uuid.uuid4().hex[:6]}"
    client.sadd(REGISTRY, name)
    try:
        gq.Producer(name, client=client).perform(b"x")
        browser.get(site + "/")
        assert browser.find_element(By.LINK_TEXT, name)
        browser.find_element(By.LINK_TEXT, name).click()
        assert browser.find_element(By.CSS_SELECTOR, ".queue-title .name").text == name
        assert browser.execute_script("return window.__xss") is None and no_dialog(browser)
    finally:
        client.srem(REGISTRY, name)
        delete_keys(client, "<img/src*")


def test_a_queue_named_x_slash_pause_is_reached_and_paused_by_clicking(
    browser: Any, site: str, client: redis.Redis
) -> None:
    """Issue #15 defect 14, as a person clicks: the link of "<q>/pause" opens that queue's
    page (not a 405), and its Pause button pauses it, not "<q>"."""
    base = f"test_browser_slash_{uuid.uuid4().hex[:6]}"
    names = [base, f"{base}/pause", f"{base}/dead"]
    client.sadd(REGISTRY, *names)
    try:
        for name in names:
            gq.Producer(name, client=client).perform(b"x")
        for name in names[1:]:
            browser.get(site + "/")
            browser.find_element(By.LINK_TEXT, name).click()
            assert browser.find_element(By.CSS_SELECTOR, ".queue-title .name").text == name
        browser.find_element(By.XPATH, "//button[text()='Pause']").click()
        flash = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".flash"), 10)
        assert flash[0].text.startswith("Queue paused")
        assert browser.find_element(By.CSS_SELECTOR, ".queue-title .name").text == names[2]
        assert [gq.Queue(n, client=client).paused for n in names] == [False, False, True]
    finally:
        client.srem(REGISTRY, *names)
        delete_keys(client, f"{base}*")


def test_read_only_mode_shows_no_buttons(browser: Any, rq: BothSides, client: redis.Redis) -> None:
    make_dead(rq, [(b"a", "e")])
    gq.Producer(rq.keys.name, client=client).perform_after(600, b"s")
    with serving(dashboard.app(client=client, read_only=True)) as address:
        for page in ("/dead", "/scheduled", ""):
            browser.get(f"http://{address}/queues/{rq.keys.name}{page}")
            assert browser.find_elements(By.TAG_NAME, "button") == [], page
            assert browser.find_elements(By.TAG_NAME, "form") == [], page
            assert browser.find_elements(By.CSS_SELECTOR, "tr.job, .cards"), page


def test_basic_auth_is_required_when_configured(
    browser: Any, rq: BothSides, client: redis.Redis
) -> None:
    with serving(dashboard.app(client=client, auth="ops:pa55word")) as address:
        browser.get(f"http://{address}/")  # Chromium asks for credentials: an empty page
        assert not browser.find_elements(By.CSS_SELECTOR, "header.top")
        assert not browser.find_elements(By.CSS_SELECTOR, f'tr[data-queue="{rq.keys.name}"]')
        browser.get(f"http://ops:pa55word@{address}/")
        assert browser.find_elements(By.CSS_SELECTOR, f'tr[data-queue="{rq.keys.name}"]')
        assert "pa55word" not in browser.page_source


def test_live_numbers_refresh_by_themselves(
    browser: Any, site: str, rq: BothSides, client: redis.Redis
) -> None:
    browser.get(f"{site}/queues/{rq.keys.name}")
    marker = browser.find_element(By.CSS_SELECTOR, "main")
    browser.execute_script("arguments[0].setAttribute('data-marked', '1')", marker)
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="ready"]').text == "0"
    gq.Producer(rq.keys.name, client=client).perform_many([b"1", b"2"])

    def ready() -> str:
        try:
            return str(browser.find_element(By.CSS_SELECTOR, '[data-field="ready"]').text)
        except StaleElementReferenceException:  # swapped between find and read
            return ""

    wait_until(lambda: ready() == "2", 15, message="the live refresh")
    assert browser.find_element(By.CSS_SELECTOR, "main").get_attribute("data-marked") == "1"


def test_a_form_posted_from_another_site_is_refused(browser: Any, site: str, rq: BothSides) -> None:
    [job_id] = make_dead(rq, [(b"a", "e")])
    browser.get(f"{site}/queues/{rq.keys.name}/dead")  # the victim has a session cookie
    target = f"{site}/queues/{rq.keys.name}/dead/delete"
    attack = (
        f'<form id="f" method="post" action="{target}"><input name="id" value="{job_id}">'
        '<input name="csrf_token" value="guess"></form>'
        '<script>document.getElementById("f").submit()</script>'
    ).encode()

    def attacker(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/html")])
        return [attack]

    server = gevent.pywsgi.WSGIServer(("127.0.0.1", 0), attacker, log=None)
    server.start()
    try:
        browser.get(f"http://localhost:{server.server_port}/")
        wait_until(lambda: "Refused" in browser.page_source, 10, message="the 403 page")
    finally:
        server.stop(timeout=1)
    assert {i.decode() for i in rq.client.zrange(rq.keys.dead, 0, -1)} == {job_id}


def test_no_page_breaks_the_content_security_policy(
    browser: Any, site: str, rq: BothSides, client: redis.Redis
) -> None:
    make_dead(rq, [(b"a", "e")])
    gq.Producer(rq.keys.name, client=client).perform_after(600, b"s")
    browser.get_log("browser")  # drop earlier entries
    queue = f"/queues/{rq.keys.name}"
    for page in ("/", queue, f"{queue}/dead", f"{queue}/scheduled", f"{queue}/consumers"):
        browser.get(site + page)
        assert browser.find_element(By.CSS_SELECTOR, "header.top")
    assert severe_logs(browser) == []
