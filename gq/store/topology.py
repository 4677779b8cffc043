"""Clients for Redis Cluster and Redis Sentinel URLs, and the hash-tag rule of a cluster.

URL forms (see ``gq.store.connection``)::

    redis+cluster://[user:password@]host:port[,host:port...]/[?query]
    redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][?query]

and their ``rediss+`` variants, whose data connections use TLS (certificate checks on,
as redis-py's ``rediss://``).
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.connection import SSLConnection, parse_url
from redis.retry import Retry

# Options of a BlockingConnectionPool that the pools of these clients do not take.
_BLOCKING_ONLY = ("max_connections", "timeout")


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a ``redis.cluster.RedisCluster`` (without importing it)."""
    return any(cls.__name__ == "RedisCluster" for cls in type(client).__mro__)


def hash_tag(name: str) -> str:
    """The hash tag Redis Cluster hashes for keys that start with ``name``, or "".

    Redis's rule: the text between the first ``{`` and the first ``}`` after it, if that
    text is not empty; otherwise the whole key is hashed.
    """
    start = name.find("{")
    if start < 0:
        return ""
    end = name.find("}", start + 1)
    return name[start + 1 : end] if end > start + 1 else ""


def url_secrets(url: str) -> list[str]:
    """The password in ``url`` (user info or ``?password=``), as written and decoded."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += parse_qs(parts.query).get("password", [])
    except ValueError:
        return []
    secrets = {candidate for value in found if value for candidate in (value, unquote(value))}
    return sorted(secrets, key=len, reverse=True)  # longest first: no partial replacements


def hide(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def scrub(text: str, url: str) -> str:
    """``text`` without the password of ``url``, as written or decoded."""
    return hide(text, url_secrets(url))


def _split(url: str) -> tuple[str, str, list[tuple[str, int]], str, str]:
    """(base scheme, user info, [(host, port)], path, query) of a multi-host URL."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("expected scheme://host:port")
    netloc, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    if "?" in netloc:  # no path: host:port?query
        netloc, _, query = netloc.partition("?")
    userinfo, _, hostlist = netloc.rpartition("@")
    nodes = []
    for item in hostlist.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {item.strip()!r}")
        nodes.append((host.strip("[]"), int(port)))
    return scheme.split("+", 1)[0].lower(), userinfo, nodes, path, query


def _options(base: str, userinfo: str, db: str, query: str) -> dict[str, Any]:
    """redis-py's connection options for a single-host URL with this user info and query."""
    auth = f"{userinfo}@" if userinfo else ""
    # redis-py leaves parse_url unannotated.
    options: dict[str, Any] = parse_url(  # type: ignore[no-untyped-call]
        f"{base}://{auth}localhost/{db}" + (f"?{query}" if query else "")
    )
    options.pop("host", None)
    options.pop("port", None)
    return options


def cluster_client(url: str, retry: Retry, **pool_options: Any) -> Any:
    """A ``RedisCluster`` for a ``redis+cluster://`` URL; it connects at once."""
    from redis.cluster import ClusterNode, RedisCluster
    from redis.exceptions import RedisClusterException

    base, userinfo, nodes, path, query = _split(url)
    if path.strip("/") not in ("", "0"):
        raise ValueError("a cluster has only database 0")
    options = _options(base, userinfo, "", query)
    options.pop("db", None)
    for name in _BLOCKING_ONLY:
        pool_options.pop(name, None)
    options.update(pool_options)
    try:
        return RedisCluster(
            # redis-py leaves ClusterNode's __init__ unannotated.
            startup_nodes=[ClusterNode(host, port) for host, port in nodes],  # type: ignore[no-untyped-call]
            retry=retry,
            **options,
        )
    except RedisClusterException as exc:  # not a RedisError: make it one
        raise redis.ConnectionError(scrub(str(exc), url)) from None


def sentinel_client(url: str, retry: Retry, **pool_options: Any) -> redis.Redis:
    """The master's client for a ``redis+sentinel://`` URL; the master is looked up per
    connection, so a failover moves new connections to the new master."""
    from redis.sentinel import Sentinel

    base, userinfo, nodes, path, query = _split(url)
    service, _, db = path.strip("/").partition("/")
    if not service:
        raise ValueError("the sentinel URL needs the service name: host:port/service[/db]")
    options = _options(base, userinfo, db, query)
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True  # the sentinel pool picks its own SSL connection class
    for name in _BLOCKING_ONLY:
        pool_options.pop(name, None)
    options.update(pool_options)
    sentinel_options = {
        key: value
        for key, value in options.items()
        if key in ("socket_timeout", "socket_connect_timeout")
    }
    # Sentinel and master_for are unannotated before redis-py 8 and annotated after: called
    # through Any, so mypy --strict passes on every redis-py gq supports.
    sentinel = cast(Any, Sentinel)(nodes, sentinel_kwargs={**sentinel_options, "retry": retry})
    client: redis.Redis = sentinel.master_for(service, retry=retry, **options)
    return client


def async_cluster_client(url: str, retry: Any) -> Any:
    """A ``redis.asyncio.cluster.RedisCluster`` for a ``redis+cluster://`` URL (for
    ``gq.aio``); it connects on first use."""
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    base, userinfo, nodes, path, query = _split(url)
    if path.strip("/") not in ("", "0"):
        raise ValueError("a cluster has only database 0")
    options = _async_options(base, userinfo, "", query)
    options.pop("db", None)
    nodes_ = [ClusterNode(host, port) for host, port in nodes]
    return RedisCluster(startup_nodes=nodes_, retry=retry, **options)


def async_sentinel_client(url: str, retry: Any) -> Any:
    """The master's ``redis.asyncio`` client for a ``redis+sentinel://`` URL (for ``gq.aio``)."""
    from redis.asyncio.sentinel import Sentinel

    base, userinfo, nodes, path, query = _split(url)
    service, _, db = path.strip("/").partition("/")
    if not service:
        raise ValueError("the sentinel URL needs the service name: host:port/service[/db]")
    options = _async_options(base, userinfo, db, query)
    timeouts = ("socket_timeout", "socket_connect_timeout")
    sentinel_options = {key: value for key, value in options.items() if key in timeouts}
    # The asyncio Sentinel's __init__: unannotated before redis-py 8 (as above).
    sentinel = cast(Any, Sentinel)(nodes, sentinel_kwargs={**sentinel_options, "retry": retry})
    return sentinel.master_for(service, retry=retry, **options)


def _async_options(base: str, userinfo: str, db: str, query: str) -> dict[str, Any]:
    """``_options`` for redis.asyncio, whose clients take ``ssl=True`` rather than the
    blocking ``SSLConnection`` class that redis-py's URL parser names."""
    options = _options(base, userinfo, db, query)
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True
    return options
