"""Task jobs in a real headless browser (chromium driven by Selenium): a task's name and
arguments read as text, and no argument can inject markup or script into the page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from selenium.webdriver.common.by import By

import gq
from gq.tasks import envelope
from tests.dashboard_support import make_dead, registered_queue
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(90)

# Each sets a marker or opens a dialog if it ever runs; the page must show it as text.
HOSTILE_ARGS = [
    "<script>window.__xss = 1</script>",
    '<img src=x onerror="window.__xss = 2">',
    "</pre><svg onload=alert(3)>",
]
HOSTILE_KWARGS = {"note": '"><script>window.__xss = 4</script>', "raw": b"<b>\x00\xff</b>"}
HOSTILE_NAME = "<img src=x onerror=alert(5)>.task"


DASHBOARD_OPTIONS = {"refresh": 0}  # (tests/browser_fixtures.py site)


@pytest.fixture
def rq(client: redis.Redis) -> Iterator[BothSides]:
    with registered_queue(client, "test_browser_tasks") as queue:
        yield queue


def untouched(browser: Any) -> bool:
    """No script of an argument ran: no marker set, no dialog open, no injected element."""
    if browser.execute_script("return window.__xss") is not None:
        return False
    if browser.find_elements(By.CSS_SELECTOR, "main script, main img, main svg"):
        return False
    try:
        browser.switch_to.alert  # noqa: B018 (reading it raises when there is none)
    except Exception:  # noqa: BLE001 - NoAlertPresentException: the good case
        return True
    return False


def test_a_hostile_task_shows_as_text_on_the_dead_and_job_pages(
    browser: Any, site: str, rq: BothSides
) -> None:
    data = envelope.encode(HOSTILE_NAME, HOSTILE_ARGS, HOSTILE_KWARGS)
    [job_id] = make_dead(rq, [(data, "boom")])
    browser.get(f"{site}/queues/{rq.keys.name}/dead")
    assert untouched(browser)
    name = browser.find_element(By.CSS_SELECTOR, "td .task .task-name").text
    assert name == HOSTILE_NAME
    args = browser.find_element(By.CSS_SELECTOR, "td .task pre.args").text
    for value in HOSTILE_ARGS:
        assert repr(value) in args
    assert f"note={HOSTILE_KWARGS['note']!r}" in args
    assert "raw=b'<b>\\x00\\xff</b>'" in args
    browser.get(f"{site}/queues/{rq.keys.name}/job?id={job_id}")
    assert untouched(browser)
    values = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "dl.task-values pre")]
    assert values == [*(repr(v) for v in HOSTILE_ARGS), *(repr(v) for v in HOSTILE_KWARGS.values())]
    assert browser.find_element(By.CSS_SELECTOR, "dl.facts .task-name").text == HOSTILE_NAME


def test_a_scheduled_task_from_the_app_reads_as_a_call(
    browser: Any, site: str, rq: BothSides, client: redis.Redis
) -> None:
    app = gq.App(client=client, queue=rq.keys.name)

    @app.task(name="hooks.deliver")
    def deliver(url: str, payload: dict[str, Any], tenant: str) -> int:
        return 200

    deliver.using(after=600).enqueue("https://example.com/hook", {"event": "paid"}, tenant="acme")
    make_dead(rq, [(b"a byte job", "e")])  # shown next to it as it always was
    browser.get(f"{site}/queues/{rq.keys.name}/scheduled")
    assert browser.find_element(By.CSS_SELECTOR, ".task-name").text == "hooks.deliver"
    call = browser.find_element(By.CSS_SELECTOR, ".task pre.args").text
    assert call == "('https://example.com/hook', {'event': 'paid'}, tenant='acme')"
    browser.get(f"{site}/queues/{rq.keys.name}/dead")
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "pre.data")] == ["a byte job"]
    assert untouched(browser)
