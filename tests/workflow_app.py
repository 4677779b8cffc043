"""The app of the workflow crash tests (tests/test_workflow_processes.py), run by real
``gq-worker`` processes (tests.fault_worker). Every run of a task is recorded on
``<queue>:test:runs``; a task whose argument is "die" SIGKILLs its own worker right after
its work, the first time only: the moment between running a step and acknowledging it."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import redis

import gq


def build(queue: str, url: str | None = None) -> gq.App:
    app = gq.App(url=url, queue=queue)
    recorder: list[redis.Redis] = []

    def note(name: str, arg: Any) -> None:
        if not recorder:
            where = os.environ.get("GQ_TEST_HANDLER_URL") or url or ""
            recorder.append(redis.Redis.from_url(where))
        client = recorder[0]
        client.rpush(f"{queue}:test:runs", name)
        if arg == "die" and client.set(f"{queue}:test:died:{name}", 1, nx=True):
            os.kill(os.getpid(), signal.SIGKILL)

    @app.task(name="step")
    def step(previous: Any, arg: str) -> str:
        note(f"step-{arg}", arg)
        return f"{previous}>{arg}"

    @app.task(name="first")
    def first(arg: str) -> str:
        note("first", arg)
        return arg

    @app.task(name="member")
    def member(index: int, arg: str) -> int:
        note(f"member-{index}", arg)
        return index

    @app.task(name="callback")
    def callback(results: list[int]) -> int:
        note("callback", "")
        return sum(results)

    @app.task(name="slow")
    def slow(seconds: float) -> str:
        time.sleep(seconds)  # (gevent's, under the worker)
        note("slow", "")
        return "late"

    @app.task(name="brief", expires=1.0)
    def brief(value: str) -> str:
        note("brief", value)
        return value + "!"

    @app.task(name="tenant", group=lambda tenant: f"t:{tenant}")
    def tenant(tenant: str) -> str:
        client = redis.Redis.from_url(os.environ.get("GQ_TEST_HANDLER_URL") or url or "")
        client.rpush(f"{queue}:test:at-once", client.incr(f"{queue}:test:running"))
        time.sleep(0.1)
        client.decr(f"{queue}:test:running")
        return tenant

    @app.task(name="echo", result_ttl=60)
    def echo(value: Any) -> Any:
        return value

    return app


app = build(os.environ.get("GQ_QUEUE", "workflows"))
