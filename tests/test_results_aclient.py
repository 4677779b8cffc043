"""``Result.aget()`` on an app built with ``aclient=`` alone (issue 31): its blocking
reads (off the event loop) go through a blocking twin of that client, not "pass url= or
client=" (gq.store.twin)."""

from __future__ import annotations

import asyncio
from typing import Any

import fakeredis
import pytest
import redis.asyncio

import gq
from gq.store.twin import sync_twin
from tests.helpers import Backend
from tests.task_support import run_app

__all__ = ["run_app"]  # the fixture


def async_client(backend: Backend) -> Any:
    if backend.kind == "fake":
        return fakeredis.FakeAsyncRedis(server=backend.server)  # type: ignore[attr-defined]
    return redis.asyncio.Redis.from_url(backend.url)  # type: ignore[attr-defined]


def test_aget_on_an_app_with_only_an_async_client(backend: Backend, run_app: Any) -> None:
    app = gq.App(aclient=async_client(backend), queue=backend.queue, result_ttl=60)

    @app.task
    def double(x: int) -> int:
        return 2 * x

    async def enqueue_and_wait() -> int:
        result = await double.aenqueue(21)
        run_app(app)  # (a greenlet: it runs while the loop waits, the suite being patched)
        return await result.aget(timeout=10)

    assert asyncio.run(enqueue_and_wait()) == 42


def test_the_twin_reaches_the_same_server_and_refuses_what_it_cannot_name() -> None:
    aclient = redis.asyncio.Redis.from_url("rediss://ada:secret@cache.example:6380/3")
    pool = sync_twin(aclient).connection_pool
    assert pool.connection_class is gq.store.twin.redis.SSLConnection
    assert {k: pool.connection_kwargs[k] for k in ("host", "port", "db", "username",
            "password")} == {"host": "cache.example", "port": 6380, "db": 3,
                             "username": "ada", "password": "secret"}  # fmt: skip
    with pytest.raises(gq.ConfigurationError, match="client= or url= too"):
        sync_twin(object())
