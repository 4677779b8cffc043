"""gq.testing as a user runs it: a pytest session of its own, with no Redis server and no
gevent patching (this suite's process is patched, so the user's session is a subprocess),
using the fixture docs/testing.md gives."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_TASKS = """
import gq

app = gq.App(url="redis://127.0.0.1:1/0")  # nothing listens there: no Redis is used


@app.task(retries=2)
def deliver(url: str, payload: dict, tenant: str) -> int:
    job = gq.current_job()
    if url == "https://flaky" and job.attempt == 0:
        raise gq.Retry(after=3600)
    if url == "https://gone":
        raise gq.Kill("endpoint gone")
    return 200


@app.task
def send_email(to: str, subject: str) -> None: ...
"""

USER_TESTS = """
import gevent.monkey
import pytest
from gq.tasks import testing

from tasks import app, deliver, send_email


@pytest.fixture
def worker():
    with testing.worker(app) as running:
        yield running


def test_not_patched():
    assert not gevent.monkey.is_module_patched("socket")


def test_eager():
    with testing.eager(app):
        assert deliver.enqueue("https://a", {}, "acme").get() == 200
        result = deliver.enqueue("https://gone", {}, "acme")
        with pytest.raises(Exception, match="endpoint gone"):
            result.get()


def test_worker_drains_retries_and_scheduled_jobs(worker):
    deliver.enqueue("https://a", {}, "acme")
    send_email.using(after=3600).enqueue("a@b", "hi")
    deliver.enqueue("https://flaky", {}, "acme")
    deliver.enqueue("https://gone", {}, "acme")
    outcomes = worker.drain()
    assert [(o.task.rsplit(".", 1)[-1], o.status, o.runs) for o in outcomes] == [
        ("deliver", "done", 1),
        ("deliver", "done", 2),
        ("deliver", "failed", 1),
        ("send_email", "done", 1),
    ]
    assert outcomes[0].value == 200
    assert outcomes[2].error == "endpoint gone"
    assert worker.drain() == []


def test_the_result_of_a_task_without_result_ttl_is_not_kept(worker):
    with pytest.raises(Exception, match="keeps no results"):
        deliver.enqueue("https://a", {}, "acme").get()
"""


@pytest.mark.timeout(120)
def test_gq_testing_in_a_plain_pytest_session(tmp_path: Path) -> None:
    (tmp_path / "tasks.py").write_text(textwrap.dedent(USER_TASKS))
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=110,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout, result.stdout
