"""Test infrastructure shared by the whole suite: waiting, Redis backends, a cuttable proxy.

Nothing here knows about gq; it only provides Redis servers, clients and the means to
take Redis away from a client (``Backend.outage``) while the test keeps its own view
(``Backend.direct``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, TypeVar
from urllib.parse import quote, unquote, urlsplit

import fakeredis
import gevent
import gevent.pool
import gevent.server
import gevent.socket
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

T = TypeVar("T")

#: Pass as ``retry=`` to make a client fail on the first error instead of retrying.
NO_RETRY = Retry(NoBackoff(), 0)
#: Set by tests/conftest.py under ``--backend=fake``: then nothing may start a real Redis.
FAKE_ONLY = False


# --------------------------------------------------------------------------- waiting


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.01,
    message: str = "",
) -> T:
    """Poll ``predicate`` until it returns a truthy value and return that value.

    This is the only way tests wait for a condition (never a fixed sleep). It sleeps with
    ``gevent.sleep`` so the greenlets under test keep running. On timeout it raises
    ``AssertionError`` naming ``message`` and the last value the predicate returned.
    Exceptions raised by the predicate propagate at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", repr(predicate))
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what}; last value: {value!r}"
            )
        gevent.sleep(interval)


def stays_true(
    predicate: Callable[[], object],
    duration: float,
    interval: float = 0.01,
    message: str = "",
) -> None:
    """Assert that ``predicate`` stays truthy for the whole of ``duration`` seconds.

    This is an observation window for negative assertions ("the job is NOT run again",
    "the consumer does NOT give up"): it can only show that nothing went wrong during the
    window, so choose ``duration`` longer than the interval of whatever the test expects
    not to happen. Raises ``AssertionError`` with the falsy value as soon as it is seen.
    """
    deadline = time.monotonic() + duration
    while True:
        value = predicate()
        if not value:
            what = message or getattr(predicate, "__name__", repr(predicate))
            raise AssertionError(f"{what} stopped holding; value: {value!r}")
        if time.monotonic() >= deadline:
            return
        gevent.sleep(interval)


# --------------------------------------------------------------------------- proxy


class TcpProxy:
    """A TCP proxy in this process that can cut every connection, to simulate an outage.

    Each accepted connection gets a connection to the target and two pumps (one per
    direction). ``outage()`` closes every open pair and from then on accepts and at once
    closes new connections; ``restore()`` passes traffic again. The listening socket is
    kept open during an outage on purpose: re-binding the port later could collide with
    an ephemeral port the kernel handed to some client meanwhile, making tests flaky.
    """

    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = 0  # chosen by the kernel at the first start(), then kept
        self.refusing = False
        self._server: gevent.server.StreamServer | None = None
        self._pool = gevent.pool.Pool()
        self._sockets: set[socket.socket] = set()

    @property
    def greenlets(self) -> int:
        """Connection handlers and pumps still running (0 once every connection is cut)."""
        return len(self._pool)

    def start(self) -> None:
        """Listen (again) on ``self.port``; the first call picks a free port."""
        if self._server is not None:
            return
        server = gevent.server.StreamServer((self.host, self.port), self._handle, spawn=self._pool)
        server.start()
        self._server = server
        self.port = server.server_port

    def stop(self) -> None:
        """Stop listening, cut every connection and end every pump greenlet."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self.close_all()
        self._pool.kill(block=True, timeout=1)

    def close_all(self) -> None:
        """Close every open connection, both sides; pumps end quietly."""
        for sock in list(self._sockets):
            self._close(sock)

    def outage(self) -> None:
        self.refusing = True
        self.close_all()

    def restore(self) -> None:
        self.refusing = False

    def _handle(self, client: socket.socket, _address: Any) -> None:
        self._sockets.add(client)  # from now on close_all() cuts it too
        if self.refusing:
            self._close(client)
            return
        try:
            upstream = gevent.socket.create_connection(self.target, timeout=5)
        except OSError:
            self._close(client)
            return
        self._sockets.add(upstream)
        if self.refusing or client not in self._sockets:  # cut while we connected upstream
            self._close(client)
            self._close(upstream)
            return
        try:
            upstream.settimeout(None)
            for sock in (client, upstream):
                # Without this, Nagle + delayed ACK add ~40 ms to small request/reply pairs.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            self._close(client)
            self._close(upstream)
            return
        self._pool.spawn(self._pump, upstream, client)
        self._pump(client, upstream)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass  # cut by close_all() or by a peer: the expected way for a pump to end
        finally:
            self._close(src)
            self._close(dst)

    def _close(self, sock: socket.socket) -> None:
        self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()  # wakes a greenlet blocked on this socket with an OSError


# --------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class RedisServer:
    """Where the real Redis of this test session is. ``url`` is always ``redis://``."""

    host: str
    port: int
    db: int = 0
    username: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        return _url(self.host, self.port, self.db, self.username, self.password)

    @classmethod
    def from_url(cls, url: str) -> RedisServer:
        parts = urlsplit(url)
        if parts.scheme != "redis":
            raise ValueError(f"GQ_TEST_REDIS_URL must be a redis:// URL, got {parts.scheme}://")
        db = int(parts.path.lstrip("/") or 0)
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        return cls(parts.hostname or "127.0.0.1", parts.port or 6379, db, user, password)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(
            host=self.host, port=self.port, db=self.db,
            username=self.username, password=self.password, **kwargs,
        )  # fmt: skip


def _url(host: str, port: int, db: int, username: str | None, password: str | None) -> str:
    auth = ""
    if password is not None:
        auth = f"{quote(username or '', safe='')}:{quote(password, safe='')}@"
    return f"redis://{auth}{host}:{port}/{db}"


def redis_answers(server: RedisServer, timeout: float = 1.0) -> bool:
    """Whether a usable Redis (PING works, credentials accepted) is at ``server``."""
    client = server.client(socket_connect_timeout=timeout, socket_timeout=timeout, retry=NO_RETRY)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis_server(workdir: str) -> tuple[subprocess.Popen[bytes], RedisServer]:
    """Start a throwaway ``redis-server`` on a free port; fail the tests if there is none."""
    if FAKE_ONLY:
        pytest.fail(
            "this test needs a real Redis but runs under --backend=fake: mark it "
            "@pytest.mark.real_redis (tests/conftest.py deselects those)",
            pytrace=False,
        )
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(
            "No Redis answers on 127.0.0.1:6379, GQ_TEST_REDIS_URL is not set and "
            "redis-server is not installed: run `apt-get install -y redis-server` "
            "(or point GQ_TEST_REDIS_URL at a Redis).",
            pytrace=False,
        )
    logfile = os.path.join(workdir, "redis.log")  # a file, not a pipe that could fill up
    for _ in range(3):  # the free port may be taken between free_port() and bind
        port = free_port()
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", workdir, "--logfile", logfile]  # fmt: skip
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        server = RedisServer("127.0.0.1", port)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            if redis_answers(server, timeout=0.2):
                return proc, server
            gevent.sleep(0.05)
        stop_process(proc)
    log = ""
    if os.path.exists(logfile):
        with open(logfile, errors="replace") as f:
            log = f.read()
    pytest.fail(f"could not start redis-server; its log:\n{log}", pytrace=False)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kept_pttl(client: redis.Redis, queue: str, job_id: str) -> int | None:
    """The PTTL of the result slot that holds ``job_id``'s record (QueueKeys.result_slot),
    or None when no live slot holds it."""
    for slot in client.zrange(f"{queue}:result-slots", 0, -1):
        if client.hexists(slot, job_id):
            return int(client.pttl(slot))
    return None


def delete_keys(client: redis.Redis, pattern: str) -> int:
    """Delete the keys matching ``pattern`` with SCAN + DEL (never FLUSHDB a shared server)."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=pattern, count=500):
        batch.append(key)
        if len(batch) >= 500:
            deleted += int(client.delete(*batch))
            batch.clear()
    if batch:
        deleted += int(client.delete(*batch))
    return deleted


# --------------------------------------------------------------------------- backends


class Backend:
    """One Redis for one test, that the test can take away from its clients.

    - ``kind``: ``"fake"`` or ``"real"``; ``queue``: a queue name unique to the test.
    - ``client(**kw)``: a new ``redis.Redis`` subject to ``outage()``.
    - ``url``: a URL subject to ``outage()`` (real), or ``None`` (fake: pass a client).
    - ``direct()``: a client that is never cut off, to inspect state during an outage.
    """

    kind: str = ""
    url: str | None = None

    def __init__(self) -> None:
        self.queue = f"test_queue_{uuid.uuid4().hex[:8]}"
        self._clients: list[redis.Redis] = []
        self._direct: redis.Redis | None = None

    def client(self, **kwargs: Any) -> redis.Redis:
        client = self._new_client(**kwargs)
        self._clients.append(client)
        return client

    def direct(self) -> redis.Redis:
        if self._direct is None:
            self._direct = self._new_direct()
        return self._direct

    def outage(self) -> None:
        raise NotImplementedError

    def restore(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Teardown: close every client this backend made."""
        for client in self._clients + ([self._direct] if self._direct else []):
            with contextlib.suppress(redis.RedisError, OSError):
                client.close()
        self._clients.clear()

    def _new_client(self, **kwargs: Any) -> redis.Redis:
        raise NotImplementedError

    def _new_direct(self) -> redis.Redis:
        raise NotImplementedError


class _FakeServerView(fakeredis.FakeServer):
    """A FakeServer that shares all state with ``real`` except its ``connected`` flag.

    fakeredis only knows a server-wide ``connected`` flag, which would also cut off
    ``Backend.direct()``; clients built on this view go down alone.
    """

    def __init__(self, real: fakeredis.FakeServer) -> None:  # no super(): state is real's
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "connected", True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "connected":
            object.__setattr__(self, name, value)
        else:
            setattr(self._real, name, value)


class FakeBackend(Backend):
    kind = "fake"

    def __init__(self) -> None:
        super().__init__()
        self.server = fakeredis.FakeServer()
        self._view = _FakeServerView(self.server)

    def outage(self) -> None:
        self._view.connected = False

    def restore(self) -> None:
        self._view.connected = True

    def _new_client(self, **kwargs: Any) -> redis.Redis:
        return fakeredis.FakeRedis(server=self._view, **kwargs)

    def _new_direct(self) -> redis.Redis:
        return fakeredis.FakeRedis(server=self.server)


class RealBackend(Backend):
    kind = "real"

    def __init__(self, server: RedisServer) -> None:
        super().__init__()
        self.server = server
        self.proxy = TcpProxy(server.host, server.port)
        self.proxy.start()
        self.url = _url(self.proxy.host, self.proxy.port, server.db, server.username,
                        server.password)  # fmt: skip

    def outage(self) -> None:
        self.proxy.outage()

    def restore(self) -> None:
        self.proxy.restore()

    def close(self) -> None:
        """Teardown: drop this test's keys, then the clients and the proxy."""
        try:
            delete_keys(self.direct(), f"{self.queue}*")
            self.direct().srem("gq:queues", self.queue)  # the queue registry (a heartbeat)
        finally:
            super().close()
            self.proxy.stop()

    def _new_client(self, **kwargs: Any) -> redis.Redis:
        s = self.server
        return redis.Redis(
            host=self.proxy.host, port=self.proxy.port, db=s.db,
            username=s.username, password=s.password, **kwargs,
        )  # fmt: skip

    def _new_direct(self) -> redis.Redis:
        return self.server.client()
