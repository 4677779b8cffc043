"""``gq --app module:app`` (and $GQ_APP): the operator's commands use a gq.App's Redis URL
and queues instead of localhost:6379, as a user runs them; a bad --app is a usage error
that says what is wrong."""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Iterator

import pytest

import gq
from gq.cli.app_flag import apply_app
from tests.bulk_support import task_message
from tests.cli_support import ADMIN, WORKER, env_for, run
from tests.helpers import RedisServer, delete_keys
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_cli_app_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


def _env(server: RedisServer, queue: str, **extra: str) -> dict[str, str]:
    """No GQ_REDIS_URL nor GQ_QUEUE: the app's URL and queue are the only way to them."""
    given = {"GQ_TEST_APP_URL": server.url, "GQ_TEST_APP_QUEUE": queue, **extra}
    return env_for(None, None, **given)


def test_stats_uses_the_apps_url_and_queue(redis_server: RedisServer, queue: str) -> None:
    gq.Producer(queue, client=redis_server.client()).perform_many([b"a", b"b"])
    env = _env(redis_server, queue)
    result = run(ADMIN, "stats", "--app", "tests.cli_app:app", "--json", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["queue"], report["ready"]) == (queue, 2)
    from_env = run(ADMIN, "stats", "--json", env={**env, "GQ_APP": "tests.cli_app:app"})
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["ready"] == 2


def test_an_app_with_several_queues_needs_queue(redis_server: RedisServer, queue: str) -> None:
    env = _env(redis_server, queue)
    result = run(ADMIN, "stats", "--app", "tests.cli_app:several", env=env)
    assert result.returncode == 2
    assert f"names several queues ({queue}-low, {queue}): pass --queue NAME" in result.stderr
    chosen = run(ADMIN, "stats", "--app", "tests.cli_app:several", "--queue", f"{queue}-low",
                 "--json", env=env)  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    assert json.loads(chosen.stdout)["queue"] == f"{queue}-low"


def test_an_explicit_url_wins_over_the_apps(redis_server: RedisServer, queue: str) -> None:
    env = _env(redis_server, queue, GQ_TEST_APP_URL="redis://127.0.0.1:1/0")  # nothing there
    result = run(ADMIN, "stats", "--app", "tests.cli_app:app", "--url", redis_server.url,
                 "--json", env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    unreachable = run(ADMIN, "stats", "--app", "tests.cli_app:app", env=env)
    assert unreachable.returncode == 3 and "127.0.0.1:1" in unreachable.stderr


@pytest.mark.parametrize(
    "spec, message",
    [
        ("tests.no_such_module:app", "cannot import module 'tests.no_such_module'"),
        ("tests.cli_app:missing", "tests.cli_app.missing has no attribute 'missing'"),
        ("tests.cli_app:not_an_app", "not a gq.App (it is int)"),
        ("tests.cli_app", "--app must be package.module:app"),
        ("tests.cli_app:unconnected", "the app has no url=: pass --url"),
    ],
)
def test_a_bad_app_is_a_usage_error_that_says_why(
    redis_server: RedisServer, queue: str, spec: str, message: str
) -> None:
    result = run(ADMIN, "stats", "--app", spec, env=_env(redis_server, queue))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_the_dashboard_and_metrics_take_every_queue_the_app_names() -> None:
    from tests import cli_app

    url = "redis://example.invalid:6379/0"  # given, so the app's (None here) is not needed
    dashboard = argparse.Namespace(app="tests.cli_app:several", url=url, queue=[])
    apply_app(dashboard)
    assert dashboard.queue == cli_app.several.queues and len(dashboard.queue) == 2
    metrics = argparse.Namespace(app="tests.cli_app:several", url=url, queues=None)
    apply_app(metrics)
    assert metrics.queues == cli_app.several.queues
    chosen = argparse.Namespace(app="tests.cli_app:several", url=url, queues=["mine"])
    apply_app(chosen)
    assert chosen.queues == ["mine"]


def test_gq_worker_takes_the_app_as_the_other_commands_do(
    redis_server: RedisServer, queue: str
) -> None:
    env = _env(redis_server, queue)
    store = BothSides(redis_server.client(), queue)
    for given in (["--app", "tests.cli_app:app"], []):  # the flag, then $GQ_APP
        job_id = str(uuid.uuid4())
        assert store.push([(job_id, task_message(job_id, "tests.cli_app.send", "a@x"))]) == [True]
        extra = {} if given else {"GQ_APP": "tests.cli_app:app"}
        result = run(WORKER, *given, "--burst", env={**env, **extra})
        assert result.returncode == 0, result.stderr
        assert store.counts()["ready"] == 0 and store.counts()["dead"] == 0  # it ran


def test_gq_worker_wants_one_handler(redis_server: RedisServer, queue: str) -> None:
    env = _env(redis_server, queue)
    both = run(WORKER, "tests.cli_app:app", "--app", "tests.cli_app:app", "--burst", env=env)
    assert both.returncode == 2 and "give HANDLER or --app, not both" in both.stderr
    neither = run(WORKER, "--burst", env=env)
    assert neither.returncode == 2 and "HANDLER is required" in neither.stderr


def test_a_filter_by_name_matches_calls_by_position_with_the_app(
    redis_server: RedisServer, queue: str
) -> None:
    store = BothSides(redis_server.client(), queue)
    sent = str(uuid.uuid4())
    assert store.push([(sent, task_message(sent, "tests.cli_app.send", "a@x"))]) == [True]
    env = _env(redis_server, queue)
    plain = run(ADMIN, "jobs", "--url", redis_server.url, "--queue", queue, "--args", "to=a@x",
                "--json", env=env)  # fmt: skip
    assert plain.returncode == 0 and json.loads(plain.stdout) == []  # (send's names unknown)
    named = run(ADMIN, "jobs", "--app", "tests.cli_app:app", "--args", "to=a@x", "--json", env=env)
    assert named.returncode == 0, named.stderr
    assert [job["id"] for job in json.loads(named.stdout)] == [sent]
    purged = run(ADMIN, "purge", "--app", "tests.cli_app:app", "--args", "to=a@x", env=env)
    assert purged.returncode == 0 and store.counts()["ready"] == 0, purged.stderr
