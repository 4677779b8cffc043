"""A silent consumer on the dashboard, in headless chromium (issue #15 section 3): on the
consumers page and the queue's overview, the consumer whose facts are 30 s overdue shows
"silent for 30s", its jobs "in flight, to be recovered at T", and its last reported
counts; the live one shows alive. fakeredis and a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

import gq
from gq import dashboard
from tests.browser_pages import flash, page
from tests.dashboard_support import chromium, serving
from tests.helpers import Backend
from tests.silent_support import LIVE, SILENT, one_live_one_silent

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("browser"))
    driver.set_window_size(1500, 900)
    try:
        yield driver
    finally:
        driver.quit()


def cell(row: Any, name: str) -> str:
    return str(row.find_element(By.CSS_SELECTOR, f'[data-field="{name}"]').text)


@pytest.mark.parametrize("page", ["/consumers", ""])
def test_a_silent_consumer_shows_silent_for_n_s_with_its_jobs_to_be_recovered(
    browser: Any, backend: Backend, page: str, tmp_path: Path
) -> None:
    one_live_one_silent(backend.direct(), backend.queue)
    with serving(dashboard.app(client=backend.client(), refresh=0)) as address:
        browser.get(f"http://{address}/queues/{backend.queue}{page}")
        silent = browser.find_element(By.CSS_SELECTOR, f'tr[data-consumer="{SILENT}"]')
        assert silent.get_attribute("class") == "silent"
        assert cell(silent, "state") == "silent"
        assert cell(silent, "silent_for") in ("silent for 30s", "silent for 31s")
        recovery = cell(silent, "recovery")
        assert recovery.startswith("in flight, to be recovered at 20"), recovery
        assert recovery.endswith(("(in 1m30s)", "(in 1m29s)")), recovery
        assert cell(silent, "in_flight").startswith("3")
        assert (cell(silent, "running"), cell(silent, "jobs_done")) == ("97 / 200", "1\u202f600")
        assert (cell(silent, "jobs_retried"), cell(silent, "jobs_dead")) == ("0", "3")
        live = browser.find_element(By.CSS_SELECTOR, f'tr[data-consumer="{LIVE}"]')
        assert (
            live.get_attribute("class") == "alive"
            and live.find_elements(By.CSS_SELECTOR, '[data-field="recovery"]') == []
        )
        if page == "":  # the overview's card: 1 alive, 1 silent
            assert (
                browser.find_element(By.CSS_SELECTOR, '[data-field="consumers_alive"]').text == "1"
            )
            assert (
                browser.find_element(By.CSS_SELECTOR, '[data-field="consumers_silent"]').text
                == "1 silent"
            )
        shot = tmp_path / f"silent{page.replace('/', '_') or '_overview'}.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_recover_now_on_a_silent_consumers_row_hands_its_jobs_back(
    browser: Any, backend: Backend
) -> None:
    """The operator knows the silent worker is dead (issue 32): its row's button hands its
    jobs back now, through a CSRF-checked POST, instead of 90 s later."""
    client = backend.direct()
    one_live_one_silent(client, backend.queue)
    keys = gq.Queue(backend.queue, client=client).store.keys
    for n in (1, 2, 3):
        client.hset(keys.data, f"job-{n}", gq.job.encode(gq.Job(f"job-{n}", b"")))
    with serving(dashboard.app(client=backend.client(), refresh=0)) as address:
        browser.get(f"http://{address}/queues/{backend.queue}/consumers")
        live = browser.find_element(By.CSS_SELECTOR, f'tr[data-consumer="{LIVE}"]')
        assert live.find_elements(By.CSS_SELECTOR, "form[data-recover]") == []
        silent = browser.find_element(By.CSS_SELECTOR, f'tr[data-consumer="{SILENT}"]')
        before = page(browser)
        silent.find_element(By.CSS_SELECTOR, "form[data-recover] button").click()
        shown = flash(browser, before)
        assert shown == "3 job(s) of the consumer handed back to the queue."
    assert sorted(client.lrange(keys.active, 0, -1)) == [b"job-1", b"job-2", b"job-3"]
    assert client.zscore(keys.consumers, keys.inflight(SILENT)) is None
