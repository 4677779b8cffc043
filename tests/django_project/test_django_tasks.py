"""gq.contrib.django with Django 6's tasks framework, a real Django project (this
folder) and real workers (``python manage.py gq_worker``) on a real Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers import wait_until

PROJECT = Path(__file__).resolve().parent


def ran(client: redis.Redis) -> list[str]:
    return [entry.decode() for entry in client.lrange("django:ran", 0, -1)]


def test_django_tasks_run_on_gq_worker_with_their_queues_context_and_signals(
    client: redis.Redis, manage: Any
) -> None:
    from django.tasks import TaskResultStatus
    from shop import tasks

    result = tasks.add.enqueue(2, 3)
    assert (result.status, result.backend, result.args) == (TaskResultStatus.READY, "default",
                                                            [2, 3])  # fmt: skip
    tasks.send_receipt.enqueue("ada", lines=["tea", "cake"])
    flaky = tasks.flaky.enqueue("x")
    broken = tasks.broken.enqueue()
    tasks.later.enqueue(4)
    assert client.hexists("emails:data", client.lindex("emails:active", 0) or b"")

    worker = manage("--poller-poll-duration", "0.5", "--scheduler-poll-interval", "0.1")
    wait_until(lambda: len(ran(client)) == 7, timeout=30, message="seven runs")
    assert sorted(ran(client)) == sorted([
        "add 2 3", "send_receipt ada 2", f"flaky x attempt 1 id {flaky.id}",
        f"flaky x attempt 2 id {flaky.id}", "broken", "broken", "later 4",
    ])  # fmt: skip
    wait_until(lambda: client.zcard("default:dead") == 1, timeout=10)
    assert client.zrange("default:dead", 0, -1) == [broken.id.encode()]
    # Django's own signals, sent by the worker: its log lines about each run.
    wait_until(lambda: f"Task id={result.id} path=shop.tasks.add state=SUCCESSFUL"
               in worker.output, timeout=10)  # fmt: skip
    assert f"Task id={broken.id} path=shop.tasks.broken state=FAILED" in worker.output
    assert "--queue" not in worker.output and "queue=default,emails" in worker.output


def test_burst_drains_and_exits(client: redis.Redis, manage: Any) -> None:
    from shop import tasks

    tasks.add.enqueue(1, 1)
    tasks.send_receipt.enqueue("bo", lines=[])
    worker = manage("--burst")
    assert worker.proc.wait(timeout=60) == 0, worker.output
    assert sorted(ran(client)) == ["add 1 1", "send_receipt bo 0"]


def test_a_runs_database_connection_is_closed_after_it(client: redis.Redis, manage: Any) -> None:
    from shop import tasks

    for n in range(3):
        tasks.uses_the_database.enqueue(n)
    worker = manage("--burst", "--concurrency", "1")  # one greenlet: one connection to reuse
    assert worker.proc.wait(timeout=60) == 0, worker.output
    assert ran(client) == [f"db {n} fresh True" for n in range(3)]


def test_run_after_schedules_the_job_on_gq(client: redis.Redis) -> None:
    from django.utils import timezone
    from shop import tasks

    when = timezone.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=when).enqueue(1, 2)
    due = client.zscore("default:scheduled", result.id)
    assert due is not None and abs(due - when.timestamp()) < 1
    assert client.llen("default:active") == 0


def test_what_django_or_gq_refuse_writes_nothing(client: redis.Redis) -> None:
    from django.tasks.exceptions import InvalidTask
    from shop import tasks

    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=10)  # gq has no priorities: refused, as Django's contract says
    with pytest.raises(InvalidTask, match="not valid for backend"):
        tasks.add.using(queue_name="elsewhere")
    with pytest.raises(TypeError, match="do not bind"):
        tasks.add.enqueue(1)
    with pytest.raises(TypeError, match="Unsupported type"):  # Django's contract: JSON-like
        tasks.add.enqueue(1, object())
    assert client.keys("*") == []


def test_the_commands_flags_are_gq_workers() -> None:
    from gq.contrib.django.worker_args import worker_argv

    tasks = {"default": {"QUEUES": ["a", "b"]}, "other": {}}
    args, env = worker_argv(["--burst"], tasks, {}, "/srv/site")
    assert args == ["gq.contrib.django.worker:app", "--burst", "--queue", "a:1", "--queue", "b:1"]
    assert (env["GQ_DJANGO_BACKEND"], env["PYTHONPATH"]) == ("default", "/srv/site")
    flags = ["--backend", "other", "--queue", "x"]
    args, env = worker_argv(flags, tasks, {"PYTHONPATH": "/l"}, "/s")
    assert args == ["gq.contrib.django.worker:app", "--queue", "x"]
    assert (env["GQ_DJANGO_BACKEND"], env["PYTHONPATH"]) == ("other", f"/s{os.pathsep}/l")
    with pytest.raises(ValueError, match="no backend 'nope'"):
        worker_argv(["--backend=nope"], tasks, {}, "/s")
    shown = subprocess.run([sys.executable, "manage.py", "gq_worker", "--help"], cwd=PROJECT,
                           env=dict(os.environ, PYTHONPATH=str(PROJECT.parent.parent)),
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "--burst" in shown.stdout and "--concurrency" in shown.stdout
