"""Checks of the test infrastructure itself (tests/conftest.py, tests/helpers.py), not of gq."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import gevent
import pytest
import redis
from gevent import monkey

from tests.helpers import NO_RETRY, Backend, RealBackend, delete_keys, stays_true, wait_until

TESTS_DIR = Path(__file__).parent


def test_suite_runs_monkey_patched() -> None:
    for name in ("socket", "ssl", "select", "threading", "time", "subprocess"):
        assert monkey.is_module_patched(name), name


def test_client_reaches_the_server(backend: Backend) -> None:
    key = f"{backend.queue}:k"
    backend.client().set(key, b"v")
    assert backend.direct().get(key) == b"v"
    if backend.kind == "real":
        assert backend.url is not None
        with redis.Redis.from_url(backend.url) as by_url:
            assert by_url.get(key) == b"v"
    else:
        assert backend.url is None


def test_outage_fails_commands_and_restore_brings_redis_back(backend: Backend) -> None:
    key = f"{backend.queue}:k"
    client = backend.client(retry=NO_RETRY)
    client.set(key, b"1")

    backend.outage()
    with pytest.raises(redis.ConnectionError):
        client.get(key)
    with pytest.raises(redis.ConnectionError):
        backend.client(retry=NO_RETRY).ping()  # new connections fail too
    assert backend.direct().get(key) == b"1"  # the test keeps its own view

    backend.restore()
    assert client.get(key) == b"1"  # the client reconnects by itself


@pytest.mark.parametrize("backend", ["real"], indirect=True)
def test_outage_cuts_a_blocked_command_at_once(
    backend: Backend, capfd: pytest.CaptureFixture[str]
) -> None:
    # Only the real backend: fakeredis runs a blocking command to its end before it looks
    # at the connection, so its outage is seen by the next command only.
    assert isinstance(backend, RealBackend)
    client = backend.client(retry=NO_RETRY)

    def blpop() -> object:
        try:
            return client.blpop([f"{backend.queue}:never"], timeout=30)
        except redis.ConnectionError as exc:
            return exc  # returned, not raised: gevent would print a raising greenlet

    waiter = gevent.spawn(blpop)
    wait_until(
        lambda: backend.direct().info("clients")["blocked_clients"] >= 1, message="BLPOP blocks"
    )
    started = time.monotonic()
    backend.outage()
    waiter.join(timeout=5)
    assert isinstance(waiter.value, redis.ConnectionError)
    assert time.monotonic() - started < 1
    wait_until(lambda: backend.proxy.greenlets == 0, message="proxy pumps end")
    assert "Traceback" not in capfd.readouterr().err  # cutting connections is quiet


def test_blocking_commands_let_other_greenlets_run(backend: Backend) -> None:
    key = f"{backend.queue}:list"
    waiter = gevent.spawn(backend.client().blpop, [key], timeout=10)
    gevent.sleep(0)  # let the waiter block first
    backend.client().rpush(key, b"x")
    wait_until(waiter.ready, timeout=3, message="BLPOP returns")
    assert waiter.get() == (key.encode(), b"x")


def test_delete_keys_removes_only_the_pattern(backend: Backend) -> None:
    direct = backend.direct()
    other = f"other_{backend.queue}"
    direct.set(f"{backend.queue}:a", 1)
    direct.set(f"{backend.queue}:b", 1)
    direct.set(other, 1)
    try:
        assert delete_keys(direct, f"{backend.queue}*") == 2
        assert direct.exists(f"{backend.queue}:a", f"{backend.queue}:b") == 0
        assert direct.exists(other) == 1
    finally:
        direct.delete(other)


def test_wait_until_returns_the_value() -> None:
    values = iter([0, None, "yes"])
    assert wait_until(lambda: next(values), timeout=1) == "yes"


def test_wait_until_times_out_with_message_and_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the answer; last value: 0"):
        wait_until(lambda: 0, timeout=0.05, message="the answer")


def test_stays_true() -> None:
    stays_true(lambda: True, 0.05)
    deadline = time.monotonic() + 0.02
    with pytest.raises(AssertionError, match="flag stopped holding"):
        stays_true(lambda: time.monotonic() < deadline, 1, message="flag")


INNER_TESTS = """
import gevent
import pytest


def test_default_limit():
    gevent.sleep(30)


@pytest.mark.timeout(0.2)
def test_marker_limit():
    gevent.sleep(30)


@pytest.fixture
def hangs_in_teardown():
    yield
    gevent.sleep(30)


@pytest.mark.timeout(0.2)
def test_teardown_limit(hangs_in_teardown):
    pass


@pytest.mark.timeout(0.2)
def test_spinning_test():
    while True:  # never yields to the hub: only the watchdog can stop it
        pass


def spin():
    while True:
        pass


@pytest.mark.timeout(0.2)
def test_spinning_greenlet():
    gevent.spawn(spin).join()


@pytest.mark.timeout(5)
def test_marker_raises_the_default():
    gevent.sleep(0.5)
"""


def test_timeouts_fail_the_test_not_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = pytester.mkpydir("tests")
    for support in TESTS_DIR.glob("*.py"):  # (conftest and what it and its plugins import)
        if not support.name.startswith("test_") and support.name != "__init__.py":
            shutil.copy(support, inner / support.name)
    (inner / "test_inner.py").write_text(INNER_TESTS)
    monkeypatch.setenv("GQ_TEST_TIMEOUT", "0.3")

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:timeout", "-p", "no:anyio", "tests", timeout=60
    )

    result.assert_outcomes(passed=2, failed=4, errors=1)
    for phase, test, seconds in [
        ("test body", "test_default_limit", "0.3"),
        ("test body", "test_marker_limit", "0.2"),
        ("teardown", "test_teardown_limit", "0.2"),
        ("test body", "test_spinning_test", "0.2"),
        ("test body", "test_spinning_greenlet", "0.2"),
    ]:
        result.stdout.fnmatch_lines(
            [f"*Timeout: {phase} of tests/test_inner.py::{test} took longer than {seconds} s*"]
        )
    result.stdout.no_fnmatch_line("*MonkeyPatchWarning*")  # nothing imported ssl before the patch
