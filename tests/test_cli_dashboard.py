"""``gq dashboard`` as a user runs it: a subprocess against a real Redis."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import gq
from tests.cli_support import ADMIN, closed_port_url, env_for, run
from tests.dashboard_support import DashboardProcess, Http
from tests.helpers import RedisServer, delete_keys


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_cli_dash_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def test_serves_the_queues_named_and_stops_cleanly_on_sigterm(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    gq.Producer(queue, client=redis_server.client()).perform_many([b"a", b"b"])
    server = DashboardProcess(
        tmp_path, "--port", "0", "--queue", queue, env=env_for(redis_server.url, None)
    )
    try:
        http = Http(server.address())
        assert http.get("/healthz").body == "ok"
        page = http.get("/")
        assert page.status == 200 and f'data-queue="{queue}"' in page.body
        assert 'data-field="ready">2<' in page.body
        assert http.get("/", Host="attacker.example").status == 400  # DNS rebinding
    finally:
        assert server.stop() == 0, server.output


def test_auth_from_the_environment_is_required_and_never_printed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    env = env_for(redis_server.url, None, GQ_DASHBOARD_AUTH="ops:hunter2-secret")
    server = DashboardProcess(tmp_path, "--port", "0", env=env)
    try:
        http = Http(server.address())
        assert http.get("/").status == 401
        http.auth = "Basic " + base64.b64encode(b"ops:hunter2-secret").decode()
        assert http.get("/").status == 200
    finally:
        server.stop()
    assert "hunter2" not in server.output and "basic auth" in server.output


def test_binding_beyond_loopback_needs_auth_or_no_auth(redis_server: RedisServer) -> None:
    result = run(ADMIN, "dashboard", "--host", "0.0.0.0", env=env_for(redis_server.url, None))
    assert result.returncode == 2
    assert "--auth" in result.stderr and "--no-auth" in result.stderr


def test_a_port_in_use_is_bad_usage_not_a_traceback(redis_server: RedisServer) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(ADMIN, "dashboard", "--port", str(port), env=env_for(redis_server.url, None))
    assert result.returncode == 2, result.stderr
    assert f"cannot serve the dashboard on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_malformed_auth_is_bad_usage(redis_server: RedisServer) -> None:
    result = run(ADMIN, "dashboard", "--auth", "no-colon", env=env_for(redis_server.url, None))
    assert result.returncode == 2 and "USER:PASSWORD" in result.stderr


def test_unreachable_redis_exits_3_without_the_password() -> None:
    url = closed_port_url().replace("redis://", "redis://:topsecret@")
    result = run(ADMIN, "dashboard", "--port", "0", env=env_for(url, None))
    assert result.returncode == 3
    assert "topsecret" not in result.stderr + result.stdout and "***" in result.stderr


def test_the_redis_password_is_not_printed(tmp_path: Path, redis_server: RedisServer) -> None:
    from tests.cli_support import start_password_server
    from tests.helpers import stop_process

    proc, server = start_password_server(tmp_path, "pw-not-shown")
    dash = DashboardProcess(tmp_path, "--port", "0", env=env_for(server.url, None))
    try:
        assert Http(dash.address()).get("/").status == 200
    finally:
        dash.stop()
        stop_process(proc)
    assert "pw-not-shown" not in dash.output and "***" in dash.output


def test_beyond_loopback_any_host_name_is_answered_unless_listed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    env = env_for(redis_server.url, None, GQ_DASHBOARD_AUTH="u:p")
    auth = "Basic " + base64.b64encode(b"u:p").decode()
    for extra, expected in (((), 200), (("--allowed-host", "gq.example"), 400)):
        server = DashboardProcess(tmp_path, "--host", "0.0.0.0", "--port", "0", *extra, env=env)
        try:
            port = server.address().rpartition(":")[2]
            http = Http(f"127.0.0.1:{port}", auth=auth)
            assert http.get("/healthz", Host=f"worker-host.lan:{port}").status == expected
            assert http.get("/healthz", Host=f"gq.example:{port}").status == 200
        finally:
            server.stop()


@pytest.mark.parametrize("host", ["127.example.com", "localhost.example.com", "127.0.0.1.nip.io"])
def test_a_host_name_that_only_looks_like_loopback_needs_auth(
    redis_server: RedisServer, host: str
) -> None:
    result = run(ADMIN, "dashboard", "--host", host, env=env_for(redis_server.url, None))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"--host {host} serves beyond this machine" in result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True), ("LocalHost", True), ("127.0.0.1", True), ("127.1.2.3", True),
        ("::1", True), ("[::1]", True), ("127.example.com", False), ("127.", False),
        ("127.0.0.1.nip.io", False), ("localhost.example.com", False), ("0.0.0.0", False),
        ("::", False), ("10.0.0.1", False), ("", False),
    ],
)  # fmt: skip
def test_only_real_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    from gq.dashboard.security import is_loopback

    assert is_loopback(host) is loopback
