"""Serving a WSGI app on gevent's server, for ``gq dashboard``, ``gq metrics`` and
``gq-worker --metrics-port``: greenlets, so no thread fights the worker's hub."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from gevent.event import Event
    from gevent.pywsgi import WSGIServer


def serve_wsgi(host: str, port: int, app: Callable[..., Any], *, connections: int) -> WSGIServer:
    """``app`` served at ``host:port`` (port 0: any free one), already listening, with no
    access log and at most ``connections`` served at once (gevent's default is unbounded).
    Raises OSError when the address cannot be bound."""
    from gevent.pywsgi import WSGIServer

    server = WSGIServer((host, port), app, spawn=connections, log=None)
    server.start()
    return server


@contextmanager
def stop_signals() -> Iterator[Event]:
    """Inside: an Event that SIGINT or SIGTERM sets. Enter it before the server starts,
    so that a signal sent as soon as the server answers (or is announced) is caught."""
    import gevent
    from gevent.event import Event

    stopping = Event()
    watchers = [gevent.signal_handler(sig, stopping.set) for sig in (signal.SIGINT, signal.SIGTERM)]
    try:
        yield stopping
    finally:
        for watcher in watchers:
            watcher.cancel()
