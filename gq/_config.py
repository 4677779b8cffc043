"""Argument checks shared by Producer and Consumer."""

from __future__ import annotations

import redis

from gq.connection import client_from_url
from gq.errors import ConfigurationError


def check_queue_name(queue: object) -> str:
    if not isinstance(queue, str) or not queue:
        raise ConfigurationError(f"a queue name (non-empty str) is required, got {queue!r}")
    if any(ch.isspace() or not ch.isprintable() for ch in queue):
        raise ConfigurationError(f"queue name {queue!r} has whitespace or control characters")
    return queue


def resolve_client(
    url: str | None, client: redis.Redis | None, **pool_options: object
) -> redis.Redis:
    """The client to use: ``client`` wins when both are given, as in curlyq."""
    if client is not None:
        return client
    if url is None:
        raise ConfigurationError("pass url= or client= to reach Redis")
    return client_from_url(url, **pool_options)
