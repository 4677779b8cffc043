"""Argument checks shared by Producer and Consumer."""

from __future__ import annotations

from typing import Any

import redis

from gq.errors import ConfigurationError
from gq.store.connection import client_from_url


def check_queue_name(queue: object) -> str:
    if not isinstance(queue, str) or not queue:
        raise ConfigurationError(f"a queue name (non-empty str) is required, got {queue!r}")
    if any(ch.isspace() or not ch.isprintable() for ch in queue):
        raise ConfigurationError(f"queue name {queue!r} has whitespace or control characters")
    return queue


def resolve_client(
    url: str | None, client: redis.Redis | Any | None, **pool_options: object
) -> Any:
    """The client to use: ``client`` wins when both are given, as in curlyq.

    ``client`` may be a ``redis.Redis`` (a Sentinel's ``master_for`` client is one) or a
    ``redis.cluster.RedisCluster``; ``RedisQueue`` checks a cluster queue's hash tag."""
    if client is not None:
        return client
    if url is None:
        raise ConfigurationError("pass url= or client= to reach Redis")
    return client_from_url(url, **pool_options)
