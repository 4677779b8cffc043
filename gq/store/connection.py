"""Redis clients built from URLs: retries off, credentials hidden, and an embedded server.

gq makes its own decisions about failures (``*_max_attempts``, backoff, abort), so the
clients it builds never retry inside redis-py: a retried fetch would strand a batch of
jobs in this consumer's in-flight set, and a retried push would report the job's own id
as a duplicate.

Besides redis-py's own ``redis://``, ``rediss://`` and ``unix://``, gq reads two URL
forms of its own (redis-py has no standard for either):

- ``redis+cluster://[user:password@]host:port[,host:port...]/[?query]`` (or
  ``rediss+cluster://``): a ``redis.cluster.RedisCluster`` started from those nodes;
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][?query]``
  (or ``rediss+sentinel://``): the master of ``service`` as the sentinels name it.
  The credentials and TLS are the data nodes'; the sentinels are reached without them.

The query takes redis-py's URL options (``ssl_ca_certs``, ``socket_timeout``...).

``valkey://`` and ``valkeys://`` (and ``valkey+cluster://``, ``valkeys+sentinel://``...)
are Valkey's names for the same protocol: each is read as its ``redis`` twin.
"""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from gq.errors import ConfigurationError

FAKEREDIS_SCHEME = "fakeredis"
DEFAULT_URL = "redis://localhost:6379/0"

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SCHEMES_HELP = (
    "use redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, "
    "redis+sentinel://, rediss+sentinel:// (or their valkey forms: valkey://, "
    "valkeys://, valkey+cluster://...) or fakeredis://"
)
# Valkey's clients take both spellings of the one protocol; redis-py takes only its own.
_VALKEY_BASES = {"valkey": "redis", "valkeys": "rediss"}

_QUERY_PASSWORD = re.compile(r"((?:^|&)password=)[^&]*", re.IGNORECASE)

_embedded_lock = threading.Lock()
_embedded_servers: dict[str, Any] = {}


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for logs and error messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    netloc = parts.netloc
    if parts.password is not None:
        # rpartition, not parts.hostname/port: a cluster or sentinel URL lists several hosts.
        netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
    # redis-py also takes the password as a query parameter (?password=...).
    query = _QUERY_PASSWORD.sub(r"\1***", parts.query)
    shown = f"{parts.scheme}://{netloc}{parts.path}" if "://" in url else url.split("?")[0]
    return shown + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def canonical_url(url: str) -> str:
    """``url`` with a ``valkey`` scheme spelled as its ``redis`` twin; any other unchanged."""
    scheme, sep, rest = url.partition(":")
    base, plus, form = scheme.lower().partition("+")
    if not sep or base not in _VALKEY_BASES:
        return url
    return f"{_VALKEY_BASES[base]}{plus}{form}:{rest}"


def checked_url(url: object) -> str:
    """``url`` as a client reads it (``canonical_url``); ConfigurationError if it is no URL."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"url must be a non-empty string, not {url!r}")
    return canonical_url(url)


def no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


def client_from_url(url: str, **pool_options: Any) -> Any:
    """A client for ``url``; ``fakeredis://[name]`` is an in-process server shared by name.

    ``pool_options`` go to ``BlockingConnectionPool.from_url`` (for example
    ``max_connections`` and ``socket_timeout``); the pool blocks, rather than fails,
    when every connection is busy. A cluster or sentinel client keeps the socket
    options but not ``max_connections``: redis-py has no blocking pool for them, and a
    pool that fails when full would fail jobs, so theirs are unbounded.
    """
    url = checked_url(url)
    scheme = url.split(":", 1)[0].lower()
    if scheme == FAKEREDIS_SCHEME:
        return _embedded_client(url)
    if scheme in CLUSTER_SCHEMES or scheme in SENTINEL_SCHEMES:
        from gq.store import topology  # redis.cluster is only imported when used

        try:
            if scheme in CLUSTER_SCHEMES:
                return topology.cluster_client(url, no_retry(), **pool_options)
            return topology.sentinel_client(url, no_retry(), **pool_options)
        except ValueError as exc:  # a malformed URL; an unreachable server stays a RedisError
            message = topology.scrub(str(exc), url)
            raise ConfigurationError(f"bad Redis URL {redact_url(url)}: {message}") from None
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigurationError(
            f"unsupported Redis URL scheme {scheme!r} in {redact_url(url)}; {SCHEMES_HELP}"
        )
    pool_options.setdefault("retry", no_retry())
    pool_options.setdefault("timeout", None)
    try:
        pool = redis.BlockingConnectionPool.from_url(url, **pool_options)
    except ValueError as exc:
        raise ConfigurationError(f"bad Redis URL {redact_url(url)}: {exc}") from None
    return redis.Redis(connection_pool=pool)


def _embedded_client(url: str) -> redis.Redis:
    import fakeredis

    return fakeredis.FakeRedis(server=embedded_server(url))


def embedded_server(url: str) -> Any:
    """The in-process server of a ``fakeredis://[name]`` URL, shared by name (sync and
    asyncio clients alike)."""
    try:
        import fakeredis
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "fakeredis:// needs fakeredis with Lua: pip install 'fakeredis[lua]'"
        ) from None
    name = urlsplit(url).netloc or "default"
    with _embedded_lock:
        server = _embedded_servers.get(name)
        if server is None:
            server = _embedded_servers[name] = fakeredis.FakeServer()
    return server
