"""gq's web dashboard: ``gq dashboard`` serves it, ``gq.dashboard.app()`` returns it as a
WSGI application to mount in a Flask or Django site (docs/dashboard.md).

Needs the ``dashboard`` extra (Jinja2): ``pip install 'gq[dashboard]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gq.options import DEFAULT_CONSUMER_TIMEOUT

if TYPE_CHECKING:
    from gq.dashboard.application import Dashboard
    from gq.jobfilter import Named

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
    consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
    refresh: float = 5.0,
    tasks: Mapping[str, Named] | None = None,
) -> Dashboard:
    """The dashboard as a WSGI application, on Redis at ``url`` (or on ``client``).

    ``queues``: shown besides the registry's; ``auth``: ``USER:PASSWORD`` (default
    ``$GQ_DASHBOARD_AUTH``); ``secret``: signs CSRF tokens (default
    ``$GQ_DASHBOARD_SECRET``, else random per process); ``allowed_hosts``: Host names
    answered (None: any); ``consumer_timeout``: silence after which a consumer is dead;
    ``refresh``: seconds between live updates (0: off); ``tasks``: an app's (``app.tasks``),
    so that a search by an argument's name finds the calls that gave it by position.
    See docs/dashboard.md.
    """
    from gq.dashboard.application import Dashboard
    from gq.dashboard.security import BasicAuth

    auth = auth if auth is not None else os.environ.get(ENV_AUTH) or None
    secret = secret if secret is not None else os.environ.get(ENV_SECRET) or None
    return Dashboard(client if client is not None else _client(url), queues=queues,
                     read_only=read_only, auth=None if auth is None else BasicAuth.parse(auth),
                     secret=secret.encode() if isinstance(secret, str) else secret,
                     allowed_hosts=allowed_hosts, consumer_timeout=consumer_timeout,
                     refresh=refresh, tasks=tasks)  # fmt: skip


def _client(url: str | None) -> Any:
    from gq.store.connection import DEFAULT_URL, client_from_url

    return client_from_url(url or DEFAULT_URL)
