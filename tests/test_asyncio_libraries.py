"""Real asyncio libraries inside async handlers (SPEC section 15): asyncio streams,
redis.asyncio and httpx's AsyncClient, each against a local server served by gevent in
the same process, so that asyncio and gevent code interleave; and ``gq-worker`` running
an ``async def`` handler as a real process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import gevent
import httpx
import pytest
import redis.asyncio
from gevent.pywsgi import WSGIServer
from gevent.server import StreamServer

import gq
from tests import queue_state as state
from tests.cli_support import WORKER, env_for, run
from tests.helpers import Backend, RedisServer, delete_keys, wait_until


def _acked(backend: Backend, ids: list[str]) -> bool:
    c = backend.direct()
    return all(state.message(c, backend.queue, i) is None for i in ids)


def _enqueue(backend: Backend, ids: list[str]) -> None:
    gq.Producer(backend.queue, client=backend.client()).perform_many(
        [gq.Job(id=i, data=i.encode()) for i in ids]
    )


@pytest.fixture
def echo_server() -> Iterator[StreamServer]:
    """A gevent TCP server answering each line with the line upper-cased, after a yield."""

    def handle(sock: Any, _address: Any) -> None:
        reader = sock.makefile("rb")
        for line in reader:
            gevent.sleep(0.001)
            sock.sendall(line.upper())
        sock.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http_server() -> Iterator[WSGIServer]:
    """A gevent WSGI server answering ``/square/N`` with N*N."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        number = int(environ["PATH_INFO"].rsplit("/", 1)[1])
        gevent.sleep(0.005)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(number * number).encode()]

    server = WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    yield server
    server.stop()


def test_asyncio_streams_against_a_gevent_server(
    backend: Backend, start: Any, echo_server: StreamServer
) -> None:
    replies: dict[str, bytes] = {}

    async def handler(job: gq.Job) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", echo_server.server_port)
        writer.write(job.data + b"\n")
        await writer.drain()
        replies[job.id] = await reader.readline()
        writer.close()
        await writer.wait_closed()

    ids = [f"s{i}" for i in range(30)]
    _enqueue(backend, ids)
    start(handler, processor_concurrency=10)
    wait_until(lambda: _acked(backend, ids))
    assert replies == {i: i.upper().encode() + b"\n" for i in ids}


def test_httpx_async_client_against_a_gevent_wsgi_server(
    backend: Backend, start: Any, http_server: WSGIServer
) -> None:
    answers: dict[str, str] = {}
    clients: list[httpx.AsyncClient] = []  # one, shared by every job (made on the loop)

    async def handler(job: gq.Job) -> None:
        if not clients:
            clients.append(
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_server.server_port}")
            )
        response = await clients[0].get(f"/square/{int(job.data)}")
        response.raise_for_status()
        answers[job.id] = response.text

    ids = [str(i) for i in range(25)]
    _enqueue(backend, ids)
    start(handler, processor_concurrency=8)
    wait_until(lambda: _acked(backend, ids))
    assert answers == {i: str(int(i) ** 2) for i in ids}


def _async_client(backend: Backend) -> Any:
    if backend.kind == "fake":
        return fakeredis.FakeAsyncRedis(server=backend.server)  # type: ignore[attr-defined]
    return redis.asyncio.Redis.from_url(backend.url)


def test_redis_asyncio_in_async_handlers_next_to_gevent_sync_handlers(
    backend: Backend, start: Any
) -> None:
    clients: list[Any] = []
    key = f"{backend.queue}:test:sum"
    sync = backend.client()

    async def add(job: gq.Job) -> None:
        if not clients:
            clients.append(_async_client(backend))
        await clients[0].incrby(key, int(job.data))

    def handler(job: gq.Job) -> Any:
        if int(job.data) % 2:
            return add(job)  # odd: redis.asyncio on the loop
        sync.incrby(key, int(job.data))  # even: the gevent-patched blocking client
        return None

    ids = [str(i) for i in range(1, 41)]
    _enqueue(backend, ids)
    start(handler, processor_concurrency=6)
    wait_until(lambda: _acked(backend, ids))
    assert int(backend.direct().get(key)) == sum(range(1, 41))


# -- gq-worker -----------------------------------------------------------------------------


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_aio_cli_{id(redis_server)}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.mark.slow
def test_gq_worker_runs_an_async_def_handler(
    redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    producer = gq.Producer(queue, client=client)
    ids = producer.perform_many([b"0.05"] * 30 + [b""] * 10)
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    result = run(WORKER, "tests.async_handlers:record", "--burst", "--concurrency", "20",
                 env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    done = [x.decode() for x in client.lrange(f"{queue}:test:done", 0, -1)]
    assert sorted(done) == sorted(ids)
    assert int(client.get(f"{queue}:test:most") or 0) > 1  # the coroutines overlapped
