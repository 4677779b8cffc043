"""The dashboard's history page (issue 34) in a real headless browser (chromium driven by
Selenium): the queue page links to it; it lists the jobs that ended with their state,
task, durations and error; its form filters by state; a job that kept a result links to
its job page; a bad filter is a clear 400."""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from typing import Any

import gevent
import pytest
import redis
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

import gq
from tests.helpers import delete_keys, wait_until

pytestmark = pytest.mark.timeout(90)

DASHBOARD_OPTIONS = {"refresh": 0}  # (tests/browser_fixtures.py site)


def test_the_history_page_lists_filters_and_links_finished_jobs(
    browser: Any, site: str, client: redis.Redis
) -> None:
    queue = f"test_browser_history-{uuid.uuid4().hex[:6]}"
    app = gq.App(client=client, queue=queue)

    @app.task(result_ttl=60)
    def invoice(n: int) -> int:
        gevent.sleep(0.05)
        return n

    @app.task(retries=0)
    def send(to: str) -> None:
        raise RuntimeError("SMTP 451 <try later>")

    consumer = gq.Consumer(queue, client=client, poller_poll_duration=1.0)
    worker = gevent.spawn(consumer.run, app)
    try:
        done = invoice.enqueue(4711).id
        dead = send.enqueue("b@x").id
        q = gq.Queue(queue, client=client)
        wait_until(lambda: len(q.history().entries) == 2)
        browser.get(f"{site}/queues/{queue}")
        browser.find_element(By.ID, "history-link").click()
        wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#history tbody tr"))
        rows = {r.get_attribute("data-id"): r for r in
                browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")}  # fmt: skip
        assert set(rows) == {done, dead}
        assert rows[done].get_attribute("data-state") == "done"
        assert "4711" in rows[done].text and invoice.name in rows[done].text
        assert rows[done].find_element(By.CSS_SELECTOR, ".duration").text.endswith("ms")
        assert "SMTP 451 <try later>" in rows[dead].text  # escaped, shown as text
        assert rows[dead].find_elements(By.CSS_SELECTOR, "a.result") == []
        Select(browser.find_element(By.NAME, "state")).select_by_visible_text("dead")
        browser.find_element(By.CSS_SELECTOR, "#history-filters button").click()
        wait_until(lambda: "state=dead" in browser.current_url)
        shown = browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")
        assert [r.get_attribute("data-id") for r in shown] == [dead]
        browser.get(f"{site}/queues/{queue}/history")
        browser.find_element(By.CSS_SELECTOR, f"tr[data-id='{done}'] a.result").click()
        wait_until(lambda: "/job?id=" in browser.current_url)
        assert done in browser.page_source and "4711" in browser.page_source
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(f"{site}/queues/{queue}/history?newer_than=soon")
        assert bad.value.code == 400 and b"invalid duration" in bad.value.read()
    finally:
        consumer.stop()
        worker.join(10)
        delete_keys(client, f"{queue}*")
