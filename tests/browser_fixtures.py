"""The fixtures of the dashboard's browser tests, shared (a plugin of tests/conftest.py; a
module's own fixture of the same name wins). ``site`` serves the dashboard with the
module's ``DASHBOARD_OPTIONS`` (say ``{"refresh": 0}``: no live updates while a test
reads the page)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from gq import dashboard
from tests.dashboard_support import browser_session, serving
from tests.helpers import RedisServer

browser = pytest.fixture(scope="module", name="browser")(browser_session)


@pytest.fixture
def client(redis_server: RedisServer) -> redis.Redis:
    return redis_server.client()


@pytest.fixture
def site(client: redis.Redis, request: pytest.FixtureRequest) -> Iterator[str]:
    """The dashboard on ``client``, served in this process: its base URL."""
    options = getattr(request.module, "DASHBOARD_OPTIONS", {})
    with serving(dashboard.app(client=client, **options)) as address:
        yield f"http://{address}"
