"""The dashboard's faces of issue 34 in a real headless browser (chromium driven by
Selenium) on a real Redis: the search box and its pages, a bulk action on a selection,
"all matching" behind its confirmation, read-only mode, a runtime schedule added and
paused from its page, and the running list's progress bar moved by a running job."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import pytest
import redis
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

import gq
from gq import dashboard
from tests.browser_pages import flash, follow, page, stale
from tests.bulk_support import Jobs
from tests.dashboard_support import Http, registered_queue, serving
from tests.helpers import wait_until
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(120)

DASHBOARD_OPTIONS = {"refresh": 2}  # (tests/browser_fixtures.py site)


@pytest.fixture
def jobs(client: redis.Redis) -> Iterator[Jobs]:
    with registered_queue(client, "test_search_browser") as queue:
        yield Jobs(client, queue.keys.name)


def found(browser: Any) -> list[str]:
    return [r.get_attribute("data-job") for r in browser.find_elements(By.CSS_SELECTOR, "tr.job")]


def search(browser: Any, **fields: str) -> None:
    form = browser.find_element(By.ID, "search")
    for name, value in fields.items():
        if name == "state":
            Select(form.find_element(By.NAME, "state")).select_by_value(value)
        else:
            box = form.find_element(By.NAME, name)
            box.clear()
            box.send_keys(value)
    form.find_element(By.XPATH, ".//button[text()='Search']").click()
    wait_until(lambda: stale(form), 10, message="the search's page")


def dead(jobs: Jobs) -> set[str]:
    return {i.decode() for i in jobs.client.zrange(jobs.q.keys.dead, 0, -1)}


def test_the_search_box_finds_jobs_by_args_and_pages_through_them(
    browser: Any, site: str, jobs: Jobs
) -> None:
    acme = {jobs.dead("app.send", i, tenant="acme") for i in range(5)}
    jobs.dead("app.send", 9, tenant="beta")
    browser.get(f"{site}/queues/{jobs.q.keys.name}")
    browser.find_element(By.LINK_TEXT, "Search").click()
    search(browser, state="dead", args="tenant=acme", per="2")
    seen = found(browser)
    assert len(seen) == 2
    while browser.find_elements(By.ID, "next-page"):
        browser.find_element(By.ID, "next-page").click()
        wait_until(lambda: browser.find_elements(By.ID, "first-page"), 10)
        seen += found(browser)
    assert sorted(seen) == sorted(acme)
    # The form kept the filter; a row leads to its job's page.
    assert browser.find_element(By.NAME, "args").get_attribute("value") == "tenant=acme"
    first = seen[-1]
    browser.find_element(By.LINK_TEXT, first).click()
    assert first in browser.find_element(By.TAG_NAME, "h2").text


def test_a_bad_filter_shows_its_reason_on_the_page(browser: Any, site: str, jobs: Jobs) -> None:
    jobs.ready("app.x")
    browser.get(f"{site}/queues/{jobs.q.keys.name}/jobs")
    search(browser, older_than="two hours")
    problem = browser.find_element(By.ID, "search-problem").text
    assert "invalid duration 'two hours'" in problem


def test_retry_two_of_three_dead_jobs_selected_in_the_page(
    browser: Any, site: str, jobs: Jobs
) -> None:
    a, b, c = (jobs.dead("app.send", i) for i in range(3))
    browser.get_log("browser")  # (read: the earlier tests' entries are gone)
    browser.get(f"{site}/queues/{jobs.q.keys.name}/jobs?state=dead")
    retry = browser.find_element(By.CSS_SELECTOR, 'button[data-verb="retry"]')
    assert not retry.is_enabled()  # nothing selected yet
    for job_id in (a, c):
        browser.find_element(By.CSS_SELECTOR, f'input[name="id"][value="{job_id}"]').click()
    before = page(browser)
    retry.click()
    assert flash(browser, before) == "2 job(s) queued again."
    assert dead(jobs) == {b} and sorted(jobs.active()) == sorted([a, c])
    assert found(browser) == [b]  # back on the same search
    # No console error (a Content-Security-Policy violation would be one).
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_all_matching_asks_first_and_acts_only_when_confirmed(
    browser: Any, site: str, jobs: Jobs
) -> None:
    broken = {jobs.dead("app.broken", i) for i in range(4)}
    fine = jobs.dead("app.fine", 1)
    browser.get(f"{site}/queues/{jobs.q.keys.name}/jobs?state=dead&task=app.broken&per=2")
    delete_all = browser.find_element(By.CSS_SELECTOR, 'button[data-verb="delete:all"]')
    delete_all.click()
    alert = wait_until(lambda: _alert(browser), 10)
    assert "every dead job matching this filter" in alert.text
    alert.dismiss()
    assert dead(jobs) == broken | {fine}  # refused: nothing changed
    before = page(browser)
    browser.find_element(By.CSS_SELECTOR, 'button[data-verb="delete:all"]').click()
    wait_until(lambda: _alert(browser), 10).accept()
    assert flash(browser, before) == "4 job(s) deleted."  # all four, not the page's two
    assert dead(jobs) == {fine}


def _alert(browser: Any) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return browser.switch_to.alert
    except NoAlertPresentException:
        return None


def test_read_only_mode_hides_the_actions_and_refuses_a_post(
    browser: Any, client: redis.Redis, jobs: Jobs
) -> None:
    job = jobs.dead("app.x")
    gq.Queue(jobs.q.keys.name, client=client).add_periodic("nightly", "app.r", every=60)
    with serving(dashboard.app(client=client, read_only=True, refresh=0)) as address:
        browser.get(f"http://{address}/queues/{jobs.q.keys.name}/jobs?state=dead")
        assert found(browser) == [job]
        assert not browser.find_elements(By.CSS_SELECTOR, "#bulk, input[type=checkbox]")
        browser.get(f"http://{address}/queues/{jobs.q.keys.name}/periodic")
        assert browser.find_elements(By.CSS_SELECTOR, 'tr[data-schedule="nightly"]')
        assert not browser.find_elements(By.CSS_SELECTOR, "main form")
        http = Http(address)
        http.get(f"/queues/{jobs.q.keys.name}/jobs")
        token = http.cookies["gq_csrf"]
        sent = [("csrf_token", token), ("verb", "retry"), ("state", "dead"), ("id", job)]
        assert http.post(f"/queues/{jobs.q.keys.name}/jobs/act", sent).status == 403
    assert dead(jobs) == {job}


def test_a_runtime_schedule_is_added_and_paused_from_its_page(
    browser: Any, site: str, jobs: Jobs, client: redis.Redis
) -> None:
    jobs.ready("app.x")  # (the queue exists)
    queue = gq.Queue(jobs.q.keys.name, client=client)
    browser.get(f"{site}/queues/{jobs.q.keys.name}")
    follow(browser, browser.find_element(By.LINK_TEXT, "Periodic"))
    form = browser.find_element(By.ID, "add-schedule")
    for name, value in (("name", "digest"), ("task", "app.digest"), ("cron", "bad rule")):
        form.find_element(By.NAME, name).send_keys(value)
    follow(browser, form.find_element(By.XPATH, ".//button[text()='Add']"))
    assert "bad cron rule" in browser.find_element(By.ID, "schedule-problem").text
    assert queue.periodic_schedules() == []
    cron = browser.find_element(By.NAME, "cron")
    cron.clear()
    cron.send_keys("*/5 * * * *")
    browser.find_element(By.NAME, "args").send_keys('["daily"]')
    before = page(browser)
    browser.find_element(By.XPATH, "//form[@id='add-schedule']//button[text()='Add']").click()
    assert flash(browser, before).startswith("Schedule added")
    [schedule] = queue.periodic_schedules()
    assert (schedule.task, schedule.cron, schedule.args) == ("app.digest", "*/5 * * * *", ["daily"])
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="digest"]')
    before = page(browser)
    row.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    assert flash(browser, before) == "Schedule paused."
    assert queue.periodic_schedules()[0].paused
    state = browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="digest"] [data-field="state"]')
    assert state.text == "paused"


def test_the_running_list_s_progress_bar_follows_a_running_job(
    browser: Any, site: str, client: redis.Redis
) -> None:
    queue = f"test_browser_running-{uuid.uuid4().hex[:6]}"
    app = gq.App(client=client, queue=queue)
    halfway, release = gevent.event.Event(), gevent.event.Event()

    @app.task(result_ttl=60)
    def files() -> None:
        job = gq.current_job()
        assert job is not None
        job.progress(0.25, note="1 of 4 files")
        halfway.wait(30)
        gevent.sleep(0.6)  # (past the client's rate limit of one write per 0.5 s)
        job.progress(0.75, note="3 of 4 files")
        release.wait(30)

    consumer = gq.Consumer(queue, client=client, poller_poll_duration=1.0)
    worker = gevent.spawn(consumer.run, app)
    try:
        r = files.enqueue()
        wait_until(r.progress)
        browser.get(f"{site}/queues/{queue}/running")
        bar = f'tr[data-job="{r.id}"] progress'
        assert float(browser.find_element(By.CSS_SELECTOR, bar).get_attribute("value")) == 0.25
        cell = browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{r.id}"]')
        assert "files" in cell.text and "1 of 4 files" in cell.text
        halfway.set()
        # The page refreshes itself (every 2 s): the bar moves without a reload.
        wait_until(lambda: _value(browser, bar) == 0.75, 20, message="the bar at 75%")
        assert (
            "3 of 4 files" in browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{r.id}"]').text
        )
        release.set()
        r.get(timeout=10)
        wait_until(lambda: not browser.find_elements(By.CSS_SELECTOR, bar), 20)
    finally:
        halfway.set()
        release.set()
        consumer.stop()
        worker.join(timeout=10)
        BothSides(client, queue).delete_queue()


def _value(browser: Any, selector: str) -> float | None:
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        found = browser.find_elements(By.CSS_SELECTOR, selector)
        return float(found[0].get_attribute("value")) if found else None
    except StaleElementReferenceException:  # swapped by the live refresh meanwhile
        return None
