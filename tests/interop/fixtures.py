"""The pytest fixtures of the curlyq interop modules (tests/test_interop.py and
tests/test_interop_tasks.py): each module imports them, so each gets its own server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import RedisServer, start_redis_server, stop_process
from tests.interop.golang import Curlyq, build


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the module's own: curlyq reaches only database 0 without a
    password, and the custodians of both sides scan the whole consumers set."""
    proc, started = start_redis_server(str(tmp_path_factory.mktemp("interop-redis")))
    try:
        yield started
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def curlyq(server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Curlyq:
    # Built once per module; Go's cache (outside the repository) makes later builds quick.
    return Curlyq(build(tmp_path_factory.mktemp("curlyq-bin")), f"{server.host}:{server.port}")


@pytest.fixture
def queue() -> str:
    return f"interop-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def direct(server: RedisServer) -> Iterator[redis.Redis]:
    client = server.client()
    yield client
    client.close()
