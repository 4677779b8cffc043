"""The project's tasks: each run is recorded on the Redis list ``django:ran``."""

from __future__ import annotations

import os

import redis
from django.tasks import task

import gq


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


class OutOfStock(Exception):
    """A task's own exception: get_result names it by its class path."""


@task
def out_of_stock(item: str) -> None:
    record(f"out_of_stock {item}")
    raise OutOfStock(f"no {item} left")


@task
def retries_later() -> None:
    record("retries_later")
    raise gq.Retry(after=3600, reason="supplier down")


@task
def waits(key: str) -> str:
    """Runs until the test pushes a value on ``key`` (30 s at most), and returns it."""
    popped = redis.Redis.from_url(os.environ["GQ_DJANGO_URL"]).blpop([key], timeout=30)
    return "timed out" if popped is None else popped[1].decode()


@task(backend="nokeep")
def quiet() -> None:
    record("quiet")


@task
def huge() -> int:
    record("huge")
    return 2**70  # JSON-like, but MessagePack has no form for it: gq cannot keep it


@task(retries=5, timeout=30, backoff=2, unique_for=600, result_ttl=120)
def restock(item: str) -> str:
    """gq's task options on Django's @task (GQTask's fields)."""
    return item


@task(group="shop")
def grouped(item: str) -> str:
    """A grouped job (gq's groups, SPEC 17), its group named on Django's @task."""
    return item


def plain(item: str) -> str:
    """Not a task: the tests make one of it."""
    return item
