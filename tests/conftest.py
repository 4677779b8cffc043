from gevent import monkey

monkey.patch_all()  # first of all: the suite runs monkey-patched, as gq-worker does

# No `from __future__ import annotations` here: it would have to come before the patch.
# Annotations below therefore stay Python 3.9-compatible at runtime (Optional, not `| None`).
import os
from collections.abc import Generator, Iterator
from typing import Any, Optional

import gevent
import pytest

import gq
from tests import helpers
from tests.helpers import (
    Backend,
    FakeBackend,
    RealBackend,
    RedisServer,
    redis_answers,
    start_redis_server,
    stop_process,
)
from tests.watchdog import Watchdog

# pytester: tests/test_infra.py runs an inner session to check timeouts; browser_fixtures:
# the dashboard's browser tests share their browser, client and site fixtures.
pytest_plugins = ["pytester", "tests.browser_fixtures"]

#: Per-phase limit in seconds when a test has no timeout marker; GQ_TEST_TIMEOUT=0 turns the
#: limit off (for a debugger).
DEFAULT_TIMEOUT = float(os.environ.get("GQ_TEST_TIMEOUT", "60"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend", choices=("all", "fake"), default="all",
        help="fake: deselect every test that needs a real Redis (the fast run on other "
        "Pythons); a test that reaches for one anyway fails instead of passing unseen",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    helpers.FAKE_ONLY = config.getoption("--backend") == "fake"
    config.addinivalue_line(
        "markers",
        "timeout(seconds): limit for each of setup, call and teardown of a test "
        f"(default {DEFAULT_TIMEOUT:g}; 0 or None = no limit); enforced with gevent.Timeout",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--backend=fake``, deselect (reported as such, never counted as passed) the
    tests that need a real Redis."""
    if not helpers.FAKE_ONLY:
        return
    real = [item for item in items if needs_real_redis(item)]
    if real:
        config.hook.pytest_deselected(items=real)
        chosen = set(map(id, real))
        items[:] = [item for item in items if id(item) not in chosen]


def needs_real_redis(item: pytest.Item) -> bool:
    """A ``real`` parametrization (the ``backend`` fixture's, test_aio's), the
    ``redis_server`` fixture, or the ``real_redis`` marker (servers and processes of its
    own). Anything else that starts one fails under ``--backend=fake`` (tests/helpers.py)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "real" in callspec.params.values():
        return True
    return "redis_server" in getattr(item, "fixturenames", ()) or bool(
        item.get_closest_marker("real_redis")
    )


# --------------------------------------------------------------------------- timeouts
# pytest-timeout is not used (setup.cfg blocks it): its signal method raises in whichever
# greenlet runs at that moment, often the hub, and its thread method ends the whole
# session. A gevent.Timeout raised in the test's greenlet fails only that test, with the
# traceback of where it was blocked. Code that never yields to the hub is interrupted by
# the watchdog instead (tests/watchdog.py); faulthandler_timeout (setup.cfg) dumps stacks.

WATCHDOG = Watchdog()


def _timeout_of(item: pytest.Item) -> Optional[float]:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        seconds: object = DEFAULT_TIMEOUT
    else:
        seconds = marker.kwargs.get("seconds", marker.args[0] if marker.args else None)
    return float(seconds) if seconds else None  # type: ignore[arg-type]


def _limited(item: pytest.Item, phase: str) -> Generator[None, Any, None]:
    """Body of the three hook wrappers below: run one phase of ``item`` under its limit."""
    seconds = _timeout_of(item)
    if seconds is None:
        yield
        return
    message = (
        f"Timeout: {phase} of {item.nodeid} took longer than {seconds:g} s "
        "(raise the limit with @pytest.mark.timeout(N))"
    )
    # pytest.fail's exception derives from BaseException, so `except Exception` in the code
    # under test cannot swallow it, and pytest reports it as an ordinary failure.
    with gevent.Timeout(seconds, pytest.fail.Exception(message, pytrace=True)):
        spin = f"{message}; interrupted by the watchdog: the code did not yield to the hub"
        with WATCHDOG.armed(seconds + min(10.0, seconds), spin):
            outcome = yield
    force_exception = getattr(outcome, "force_exception", None)  # pluggy >= 1.1
    if WATCHDOG.fired and outcome.excinfo is None and force_exception is not None:
        # The watchdog hit another greenlet (a spinning loop) and the test then passed.
        force_exception(pytest.fail.Exception(spin, pytrace=False))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, None]:
    yield from _limited(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    yield from _limited(item, "test body")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, None]:
    yield from _limited(item, "teardown")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The real Redis: GQ_TEST_REDIS_URL, else 127.0.0.1:6379, else a redis-server we start."""
    if helpers.FAKE_ONLY:
        helpers.start_redis_server("")  # fails the test, saying how to mark it
    url = os.environ.get("GQ_TEST_REDIS_URL")
    if url:
        server = RedisServer.from_url(url)
        if not redis_answers(server):
            pytest.fail(
                f"GQ_TEST_REDIS_URL is set but {server.host}:{server.port} does not answer PING",
                pytrace=False,
            )
        yield server
        return
    local = RedisServer("127.0.0.1", 6379)
    if redis_answers(local):
        yield local
        return
    proc, server = start_redis_server(str(tmp_path_factory.mktemp("redis")))
    try:
        yield server
    finally:
        stop_process(proc)


@pytest.fixture(params=["fake", "real"], ids=["fake", "real"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The same test on fakeredis and on a real Redis behind a cuttable proxy.

    Only the real kind needs (and starts) ``redis_server``, so ``-k fake`` runs without it.
    """
    if request.param == "fake":
        chosen: Backend = FakeBackend()
    else:
        chosen = RealBackend(request.getfixturevalue("redis_server"))
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture
def start(backend: Backend) -> Iterator[Any]:
    """Start a consumer in a greenlet; stop it (and check it stopped cleanly) at teardown."""
    running: list[Any] = []

    def start_consumer(handler: Any, **options: Any) -> Any:
        options.setdefault("poller_poll_duration", 1)
        consumer = gq.Consumer(backend.queue, client=backend.client(), **options)
        consumer.opts.poller_poll_duration = 0.2
        greenlet = gevent.spawn(consumer.run, handler)
        running.append((consumer, greenlet))
        return consumer, greenlet

    yield start_consumer
    for consumer, greenlet in running:
        consumer.stop()
        greenlet.join(timeout=10)
        assert greenlet.dead
