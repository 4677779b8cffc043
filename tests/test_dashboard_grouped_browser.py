"""Jobs waiting in groups' lines on the dashboard, in a real headless browser (Debian's
chromium driven by Selenium): counted apart from ready ones on the overview and the queue
page, and the Groups table's headers over their own values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from selenium.webdriver.common.by import By

import gq
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue
from tests.dashboard_support import registered_queue
from tests.test_dashboard_browser import field, severe_logs

pytestmark = pytest.mark.timeout(90)

# How far (CSS px) a header's text may sit from its cells' text and still line up.
TOLERANCE = 2.0
# The left and right edges of an element's text (not of its cell, which a table always aligns).
TEXT_EDGES = """
const range = document.createRange();
range.selectNodeContents(arguments[0]);
const box = range.getBoundingClientRect();
return [box.left, box.right];
"""


@pytest.fixture
def queue(client: redis.Redis) -> Iterator[str]:
    with registered_queue(client, "test_grouped") as found:
        yield found.keys.name


def _push(client: redis.Redis, queue: str, counts: dict[str, int]) -> None:
    entries = [(f"{g}-{i}", gq.job.encode(gq.Job(f"{g}-{i}".encode())), 0.0, g)
               for g, n in counts.items() for i in range(n)]  # fmt: skip
    push_group(RedisQueue(client, queue), "now", entries)


def test_grouped_jobs_show_apart_from_ready_on_the_overview_and_queue_page(
    browser: Any, site: str, queue: str, client: redis.Redis
) -> None:
    _push(client, queue, {"tenant:big": 12, "tenant:small": 3})
    gq.Producer(queue, client=client).perform_many([b"plain"])
    browser.get(site + "/")
    assert field(browser, queue, "ready") == "1"
    assert field(browser, queue, "grouped") == "15"
    browser.find_element(By.LINK_TEXT, queue).click()
    card = browser.find_element(By.CSS_SELECTOR, '.cards [data-field="grouped"]')
    assert card.text == "15"
    assert browser.find_element(By.CSS_SELECTOR, '.cards [data-field="ready"]').text == "1"
    assert severe_logs(browser) == []


def _lined_up(browser: Any, header: Any, cell: Any) -> bool:
    (h_left, h_right), (c_left, c_right) = (browser.execute_script(TEXT_EDGES, e)
                                            for e in (header, cell))  # fmt: skip
    return abs(h_left - c_left) <= TOLERANCE or abs(h_right - c_right) <= TOLERANCE


def test_the_groups_table_headers_line_up_with_their_values(
    browser: Any, site: str, queue: str, client: redis.Redis
) -> None:
    gq.Queue(queue, client=client).set_group_limits(concurrency=2, rate=(10, 1.0))
    _push(client, queue, {"tenant:big": 30, "tenant:small": 2})
    browser.get(f"{site}/queues/{queue}")
    table = browser.find_element(By.CSS_SELECTOR, "#groups table")
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(headers) == 6 and len(rows) == 2
    for row in rows:
        cells = row.find_elements(By.CSS_SELECTOR, "td")
        assert len(cells) == len(headers)
        for header, cell in zip(headers, cells):
            assert _lined_up(browser, header, cell), (header.text, cell.text)
