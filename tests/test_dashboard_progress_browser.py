"""A running job's progress bar on the dashboard's job page, in a real headless browser
(chromium driven by Selenium): shown while the task runs, with its note as text, and
gone once the job ended."""

from __future__ import annotations

import uuid
from typing import Any

import gevent
import gevent.event
import pytest
import redis
from selenium.webdriver.common.by import By

import gq
from tests.helpers import wait_until
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(90)

DASHBOARD_OPTIONS = {"refresh": 0}  # (tests/browser_fixtures.py site)
NOTE = "<b>3 of 7</b> files"


def test_the_job_page_shows_a_running_job_s_progress_bar(
    browser: Any, site: str, client: redis.Redis
) -> None:
    queue = f"test_browser_progress-{uuid.uuid4().hex[:6]}"
    app = gq.App(client=client, queue=queue)
    release = gevent.event.Event()

    @app.task(result_ttl=60)
    def files() -> None:
        job = gq.current_job()
        assert job is not None
        job.progress(0.42, note=NOTE)
        release.wait(30)

    consumer = gq.Consumer(queue, client=client, poller_poll_duration=1.0)
    worker = gevent.spawn(consumer.run, app)
    try:
        r = files.enqueue()
        wait_until(r.progress)
        browser.get(f"{site}/queues/{queue}/job?id={r.id}")
        bar = browser.find_element(By.CSS_SELECTOR, "#job-progress progress")
        assert float(bar.get_attribute("value")) == pytest.approx(0.42)
        assert browser.find_element(By.CSS_SELECTOR, "#job-progress .progress-pct").text == "42%"
        note = browser.find_element(By.CSS_SELECTOR, "#job-progress .progress-note")
        assert note.text == NOTE  # as text: no markup of a task's note reaches the page
        assert not browser.find_elements(By.CSS_SELECTOR, "#job-progress b")
        release.set()
        r.get(timeout=10)
        browser.get(f"{site}/queues/{queue}/job?id={r.id}")
        assert not browser.find_elements(By.CSS_SELECTOR, "#job-progress")
    finally:
        release.set()
        consumer.stop()
        worker.join(timeout=10)
        BothSides(client, queue).delete_queue()
