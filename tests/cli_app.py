"""Apps for ``gq --app`` (tests/test_cli_app.py): their Redis and queue come from the
environment the test gives the command."""

from __future__ import annotations

import os

import gq

URL = os.environ.get("GQ_TEST_APP_URL")
QUEUE = os.environ.get("GQ_TEST_APP_QUEUE", "cli-app")

app = gq.App(url=URL, queue=QUEUE)
several = gq.App(url=URL, queue=QUEUE)
unconnected = gq.App(queue=QUEUE)
not_an_app = 42


@app.task
def send(to: str) -> None:
    """A task on the app's one queue."""


@several.task(queue=f"{QUEUE}-low")
def low(n: int) -> None:
    """A task on a second queue."""


@several.task
def high(n: int) -> None:
    """A task on the default queue."""
