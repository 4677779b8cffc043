"""A blocking client to the server a ``redis.asyncio`` client reaches, for an app built
with ``aclient=`` alone: ``Result.aget`` reads and subscribes off the event loop, in
threads, through the blocking client (gq.tasks.results), so that app needs one too.

Only the connection's plain settings are carried (where, who, TLS, timeouts): the pool
is new, with gq's no-retry policy (gq.store.connection). A cluster or Sentinel asyncio
client has no such single address: it needs ``client=`` (or ``url=``) as well.
"""

from __future__ import annotations

from typing import Any

import redis

from gq.errors import ConfigurationError
from gq.store.connection import no_retry

#: The settings of a redis.asyncio connection that mean the same to a blocking one.
PLAIN_SETTINGS = (
    "host", "port", "db", "username", "password", "path", "client_name",
    "socket_timeout", "socket_connect_timeout", "socket_keepalive",
    "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_data",
    "ssl_check_hostname", "ssl_min_version", "ssl_ciphers",
)  # fmt: skip

#: A blocking connection class per redis.asyncio one, by name.
CLASSES = {
    "Connection": redis.Connection,
    "SSLConnection": redis.SSLConnection,
    "UnixDomainSocketConnection": redis.UnixDomainSocketConnection,
}


def sync_twin(aclient: Any) -> Any:
    """A blocking client to ``aclient``'s server; ConfigurationError when it has none
    gq can name (a cluster or Sentinel client, another library's)."""
    pool = getattr(aclient, "connection_pool", None)
    settings: dict[str, Any] = dict(getattr(pool, "connection_kwargs", None) or {})
    if settings.get("server") is not None:
        return _fake_twin(settings)
    kind = CLASSES.get(getattr(getattr(pool, "connection_class", None), "__name__", ""))
    if kind is None:
        raise ConfigurationError(
            f"gq.App(aclient={type(aclient).__name__}) alone: the blocking reads of "
            "Result.get()/aget() need client= or url= too (for a cluster or Sentinel)"
        )
    plain = {name: settings[name] for name in PLAIN_SETTINGS if name in settings}
    twin = redis.ConnectionPool(connection_class=kind, retry=no_retry(), **plain)
    return redis.Redis(connection_pool=twin)


def _fake_twin(settings: dict[str, Any]) -> Any:
    """A fakeredis client of the same in-process server (gq.testing, tests)."""
    import fakeredis

    return fakeredis.FakeRedis(server=settings["server"], db=settings.get("db", 0))
