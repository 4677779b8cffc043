"""gq's web dashboard: ``gq dashboard`` serves it, ``gq.dashboard.app()`` returns it as a
WSGI application to mount in a Flask or Django site (docs/dashboard.md).

Needs the ``dashboard`` extra (Jinja2): ``pip install 'gq[dashboard]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gq.dashboard.application import Dashboard

ENV_AUTH = "GQ_DASHBOARD_AUTH"
ENV_SECRET = "GQ_DASHBOARD_SECRET"


def app(
    url: str | None = None,
    *,
    client: Any = None,
    queues: Iterable[str] = (),
    read_only: bool = False,
    auth: str | None = None,
    secret: str | bytes | None = None,
    allowed_hosts: Iterable[str] | None = None,
    consumer_timeout: float = 120.0,
    refresh: float = 5.0,
) -> Dashboard:
    """The dashboard as a WSGI application, on Redis at ``url`` (or on ``client``).

    ``queues`` are shown besides those in the registry; ``auth`` is ``USER:PASSWORD``
    (default ``$GQ_DASHBOARD_AUTH``, unset: no auth); ``secret`` signs the CSRF tokens
    (default ``$GQ_DASHBOARD_SECRET``, else random per process: set it when several
    processes serve one dashboard); ``allowed_hosts`` limits the Host header (None: any,
    for a site that checks it itself); ``consumer_timeout`` is the silence after which a
    consumer counts as dead (the workers' heartbeat interval + custodian timeout);
    ``refresh`` the seconds between live updates of a page (0: off, at least 2).
    """
    from gq.dashboard.application import Dashboard
    from gq.dashboard.security import BasicAuth

    if client is None:
        from gq.connection import DEFAULT_URL, client_from_url

        client = client_from_url(url or DEFAULT_URL)
    auth = auth if auth is not None else os.environ.get(ENV_AUTH) or None
    secret = secret if secret is not None else os.environ.get(ENV_SECRET) or None
    return Dashboard(
        client,
        queues=queues,
        read_only=read_only,
        auth=None if auth is None else BasicAuth.parse(auth),
        secret=secret.encode() if isinstance(secret, str) else secret,
        allowed_hosts=allowed_hosts,
        consumer_timeout=consumer_timeout,
        refresh=refresh,
    )
