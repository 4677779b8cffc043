"""The project's tasks: each run is recorded on the Redis list ``django:ran``."""

from __future__ import annotations

import os

import redis
from django.tasks import task


def record(what: str) -> None:
    redis.Redis.from_url(os.environ["GQ_DJANGO_URL"]).rpush("django:ran", what)


@task
def add(a: int, b: int) -> int:
    record(f"add {a} {b}")
    return a + b


@task(queue_name="emails")
def send_receipt(to: str, *, lines: list[str]) -> dict[str, object]:
    record(f"send_receipt {to} {len(lines)}")
    return {"to": to, "lines": tuple(lines)}  # a tuple: Django's JSON form is a list


@task(takes_context=True)
def flaky(context, name: str) -> str:  # noqa: ANN001 - Django's TaskContext
    record(f"flaky {name} attempt {context.attempt} id {context.task_result.id}")
    if context.attempt == 1:
        raise RuntimeError("first attempt fails")
    return name


@task
def broken() -> None:
    record("broken")
    raise ValueError("always")


@task
async def later(n: int) -> int:
    record(f"later {n}")
    return n


@task
def uses_the_database(n: int) -> None:
    from django.db import connection

    # Whether the connection of this greenlet's previous run was closed after it.
    record(f"db {n} fresh {connection.connection is None}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
