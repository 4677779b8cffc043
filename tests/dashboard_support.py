"""Serving the dashboard in this (monkey-patched) test process, and a small HTTP client.

The client speaks plain HTTP/1.1 over a socket (http.client), keeps the CSRF cookie the
way a browser would, and never follows redirects, so tests see each 303 as it is.
"""

from __future__ import annotations

import http.client
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import gevent.pywsgi
import redis

import gq
from gq import job as jobs
from tests.queue_sides import BothSides

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@contextmanager
def serving(app: Any, prefix: str = "") -> Iterator[str]:
    """``app`` on a gevent WSGIServer at 127.0.0.1:<free port>; yields its base URL path
    host:port. With ``prefix``, the app is mounted under it as a WSGI host site would."""

    def mounted(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(prefix):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not under the prefix"]
        environ["SCRIPT_NAME"] = prefix
        environ["PATH_INFO"] = path[len(prefix) :]
        return app(environ, start_response)

    server = gevent.pywsgi.WSGIServer(("127.0.0.1", 0), mounted if prefix else app, log=None)
    server.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.stop(timeout=1)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str

    @property
    def token(self) -> str:
        match = TOKEN.search(self.body)
        assert match, "no CSRF token on the page"
        return match.group(1)


@dataclass
class Http:
    """A client that keeps the gq_csrf cookie, like a browser."""

    address: str
    cookies: dict[str, str] = field(default_factory=dict)
    auth: str | None = None  # an Authorization header value

    def get(self, path: str, **headers: str) -> Reply:
        return self.request("GET", path, None, headers)

    def post(self, path: str, fields: Sequence[tuple[str, str]], **headers: str) -> Reply:
        body = urlencode(list(fields))
        headers = {"Content-Type": "application/x-www-form-urlencoded", **headers}
        return self.request("POST", path, body, headers)

    def request(self, method: str, path: str, body: str | None, headers: dict[str, str]) -> Reply:
        conn = http.client.HTTPConnection(self.address, timeout=10)
        sent = {k.replace("_", "-"): v for k, v in headers.items()}
        if self.cookies:
            sent.setdefault("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        if self.auth:
            sent.setdefault("Authorization", self.auth)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            reply = Reply(response.status, dict(response.getheaders()), response.read().decode())
        finally:
            conn.close()
        self._keep_cookie(reply.headers.get("Set-Cookie"))
        return reply

    def _keep_cookie(self, header: str | None) -> None:
        if header:
            name, _, value = header.split(";")[0].partition("=")
            self.cookies[name.strip()] = value.strip()


@contextmanager
def registered_queue(client: redis.Redis, prefix: str) -> Iterator[BothSides]:
    """A fresh queue in the registry, as a worker registers it (the contract); deleted
    with every key it got once the block ends."""
    from tests.helpers import delete_keys

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    client.sadd("gq:queues", name)
    try:
        yield BothSides(client, name)
    finally:
        client.srem("gq:queues", name)
        delete_keys(client, f"{name}*")


def make_dead(rq: BothSides, items: Sequence[tuple[bytes, str]], attempt: int = 3) -> list[str]:
    """Dead jobs with the given (data, error), killed as a consumer kills them (the queue
    must have nothing ready: the consumer fetches from its head)."""
    producer = gq.Producer(rq.keys.name, client=rq.client)
    ids = producer.perform_many([data for data, _ in items])
    consumer = str(uuid.uuid4())
    rq.register(consumer)
    fetched = dict(rq.fetch(consumer, len(items)))
    for job_id, (data, error) in zip(ids, items):
        updated = jobs.encode(gq.Job(id=job_id, data=data, attempt=attempt), error=error)
        assert fetched[job_id] is not None
        assert rq.kill(consumer, job_id, updated, dead_max_jobs=1000, dead_max_age=1e7)
    rq.deregister(consumer)
    return ids


def write_facts(
    client: redis.Redis, queue: str, consumer_id: str, **overrides: Any
) -> dict[str, Any]:
    """A consumer's facts exactly as the worker side writes them (the contract)."""
    import json

    now = time.time()
    facts = {
        "id": consumer_id, "host": "worker-7", "pid": 4242, "started_at": now - 3725,
        "version": gq.__version__, "queues": [queue], "concurrency": 50, "running": 7,
        "jobs_done": 12345, "jobs_failed": 42, "jobs_retried": 30, "jobs_dead": 12,
        "rss_bytes": 150 * 1048576,
        "cpu_percent": 37.5, "updated_at": now, **overrides,
    }  # fmt: skip
    client.set(f"{queue}:facts:{consumer_id}", json.dumps(facts), px=120_000)
    return facts


def write_history(
    client: redis.Redis, queue: str, per_minute: dict[int, tuple[int, ...]]
) -> None:
    """Counts per minute exactly as the worker side writes them: HINCRBY into
    ``Q:history:<hour>`` fields ``done:<minute>`` / ``failed:<minute>`` (failed attempts,
    retries included) / ``retried:<minute>``, EXPIRE 90000."""
    for minute, counts in per_minute.items():
        key = f"{queue}:history:{minute - minute % 3600}"
        for kind, count in zip(("done", "failed", "retried"), counts):
            if count:
                client.hincrby(key, f"{kind}:{minute}", count)
        client.expire(key, 90000)


class DashboardProcess:
    """``gq dashboard`` as a user starts it: a subprocess whose output goes to a file."""

    LINE = re.compile(r"gq dashboard: http://([^/\s]+)/")

    def __init__(self, tmp_path: Any, *args: str, env: dict[str, str]) -> None:
        import subprocess

        from tests.cli_support import ADMIN, ROOT

        self.path = tmp_path / f"dashboard-{uuid.uuid4().hex[:6]}.log"
        with open(self.path, "wb") as out:
            self.proc = subprocess.Popen(
                [*ADMIN, "dashboard", *args], cwd=ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    @property
    def output(self) -> str:
        return str(self.path.read_text(errors="replace"))

    def address(self, timeout: float = 20) -> str:
        """host:port once it serves (it prints the URL after binding)."""
        from tests.helpers import wait_until

        wait_until(
            lambda: self.LINE.search(self.output) or self.proc.poll() is not None,
            timeout,
            message="gq dashboard's URL in its output",
        )
        match = self.LINE.search(self.output)
        assert match, self.output
        return match.group(1)

    def stop(self) -> int:
        import signal

        from tests.helpers import stop_process

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - however the wait failed, the process is killed
                stop_process(self.proc)
        return int(self.proc.returncode)


# -- a real headless browser -----------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser_session(tmp_path_factory: Any) -> Iterator[Any]:
    """A chromium shared by a module's browser tests: the body of their ``browser``
    fixture (``browser = pytest.fixture(scope="module")(browser_session)``)."""
    driver = chromium(tmp_path_factory.mktemp("browser"))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def chromium(tmp_path: Any) -> Any:
    """Debian's chromium under Selenium, with the driver path given so that Selenium
    Manager never tries to download one. Missing binaries skip the test, but fail it
    when CI is set (the CI script installs them)."""
    import os
    import shutil

    missing = [exe for exe in (CHROMIUM, CHROMEDRIVER) if not shutil.which(exe)]
    if missing:
        import pytest

        reason = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
        f"--user-data-dir={tmp_path}/chromium", "--no-first-run", "--disable-sync",
        "--disable-background-networking", "--disable-component-update", "--disable-quic",
        "--window-size=1280,900",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
