"""Clicks that load a page, in a real browser: wait until the new page has replaced the
old one before reading it. Read too early, a test reads the old page's element (its
flash message, or an element gone stale as the new page arrives): CI failed so."""

from __future__ import annotations

from typing import Any

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from tests.helpers import wait_until


def page(browser: Any) -> Any:
    """The page shown now (its <html>), to tell when a click has replaced it."""
    return browser.find_element(By.TAG_NAME, "html")


def stale(element: Any) -> bool:
    """Whether ``element`` belongs to a page that has been replaced."""
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    return False


def follow(browser: Any, element: Any) -> None:
    """Click a link or a form's button and wait until the next page has replaced this one."""
    before = page(browser)
    element.click()
    wait_until(lambda: stale(before), 10, message="the next page")


def flash(browser: Any, before: Any) -> str:
    """The flash message of the page that replaced ``before`` (``page`` before the click)."""
    wait_until(lambda: stale(before), 10, message="the next page")
    return str(wait_until(lambda: _flash_text(browser), 10, message="a flash message"))


def _flash_text(browser: Any) -> str | None:
    try:
        shown = browser.find_elements(By.CSS_SELECTOR, ".flash")
        return str(shown[0].text) if shown else None
    except StaleElementReferenceException:
        return None
