"""The Django tests run where Django 6 is installed (Python 3.12+: .ci/django makes
such a venv); elsewhere this folder's tests are not collected (not skipped: not run).

Their fixtures: the project's Redis database (emptied by each test) and real workers
(``python manage.py gq_worker``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers import RedisServer, stop_process

PROJECT = Path(__file__).resolve().parent
#: The project's own database on the test Redis: emptied by each test.
DB = int(os.environ.get("GQ_DJANGO_TEST_DB", "9"))
#: Where .ci/django extracted the installed Django's own task tests (their ``tasks``
#: package's parent): test_django_own.py runs them, and is collected only when set.
OWN_TESTS = os.environ.get("GQ_DJANGO_OWN_TESTS")

collect_ignore_glob: list[str] = []
if sys.version_info < (3, 12) or importlib.util.find_spec("django") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    # As manage.py's directory is for the project: its `project` and `shop` modules.
    sys.path.insert(0, str(PROJECT))
    if not OWN_TESTS:
        collect_ignore_glob = ["test_django_own.py"]


@pytest.fixture(scope="module")
def django_url(redis_server: RedisServer) -> str:
    import django

    url = f"redis://{redis_server.host}:{redis_server.port}/{DB}"
    os.environ["GQ_DJANGO_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    django.setup()
    return url


@pytest.fixture
def client(django_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(django_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


class ManageWorker:
    """``python manage.py gq_worker ...`` in the project, output in a file."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.path = tmp_path / f"gq_worker-{time.monotonic_ns()}.log"
        env = dict(os.environ, PYTHONPATH=str(PROJECT.parent.parent),
                   GQ_DJANGO_DB=str(tmp_path / "db.sqlite3"))  # fmt: skip
        with open(self.path, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "gq_worker", *flags], cwd=PROJECT, env=env,
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    @property
    def output(self) -> str:
        return self.path.read_text(errors="replace")


@pytest.fixture
def manage(tmp_path: Path) -> Iterator[Any]:
    started: list[ManageWorker] = []

    def start(*flags: str) -> ManageWorker:
        started.append(ManageWorker(tmp_path, *flags))
        return started[-1]

    yield start
    for worker in started:
        stop_process(worker.proc)
