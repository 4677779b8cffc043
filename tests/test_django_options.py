"""A GQBackend's OPTIONS become its gq.App's arguments (gq/contrib/django/options.py, no
Django needed: runs on every Python of the suite); the backend itself is tested with
Django in tests/django_project."""

from __future__ import annotations

import uuid

import gq
from gq.contrib.django.options import DEFAULT_RESULT_TTL, app_arguments
from gq.store.shards import forget, layout
from tests.helpers import RedisServer, delete_keys


def test_shards_in_options_reach_the_app_and_its_jobs_go_to_the_shards(
    redis_server: RedisServer,
) -> None:
    name = f"dj-{uuid.uuid4().hex[:8]}"
    options = {"url": redis_server.url, "SHARDS": {name: 3}, "RETRIES": 2}
    arguments = app_arguments(options, name)
    assert arguments == {"url": redis_server.url, "shards": {name: 3}, "retries": 2,
                         "result_ttl": DEFAULT_RESULT_TTL, "queue": name}  # fmt: skip
    app = gq.App(**arguments)
    client = redis_server.client()
    try:
        assert app.sharding.counts == {name: 3}

        @app.task(name="shop.tasks.add")
        def add(x: int, y: int) -> int:
            return x + y

        ids = [add.enqueue(i, 1).id for i in range(30)]
        on = {shard: client.hlen(f"{shard}:data") for shard in layout(name, 3).queues}
        assert sum(on.values()) == 30 and all(on.values()), on  # spread over the shards
        assert app.result(ids[0]).status() == "ready"  # found on its shard
    finally:
        delete_keys(client, f"{{{name}~*")
        forget(client, name)


def test_options_without_result_ttl_keep_results_and_keys_are_read_in_any_case() -> None:
    arguments = app_arguments({"Timeout": 5, "RESULT_TTL": 0}, "default")
    assert arguments == {"timeout": 5, "result_ttl": 0, "queue": "default"}
    assert app_arguments({}, "q")["result_ttl"] == DEFAULT_RESULT_TTL
