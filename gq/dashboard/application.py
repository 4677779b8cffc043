"""The dashboard's WSGI application: security checks, routing and rendering.

Order of the checks in ``_respond``: Host (when standalone), ``/healthz`` (open, for load
balancers), basic auth, then for a POST read-only mode and the CSRF token, all before a
route runs; a route that changes something is only ever reached by a checked POST.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

import redis
from jinja2 import Environment, PackageLoader, StrictUndefined

from gq.dashboard import (
    filters,
    history_pages,
    pages,
    results_pages,
    running_pages,
    schedule_pages,
    search_pages,
)
from gq.dashboard.http import HTTPError, Request, Response, json_response, text_response
from gq.dashboard.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    BasicAuth,
    Csrf,
    cookie_header,
    cross_site,
    host_allowed,
)
from gq.errors import ConfigurationError
from gq.jobfilter import Named
from gq.options import DEFAULT_CONSUMER_TIMEOUT
from gq.queue import Queue
from gq.store.admin import registered_queues
from gq.store.shards import declared, fold
from gq.version import __version__

log = logging.getLogger("gq.dashboard")

Handler = Callable[..., Response]
StartResponse = Callable[..., Any]

# (method, path pattern, handler); the first full match wins. A queue name is one path
# segment: its links escape "/" and "%" once more (pages.name_segment), because a WSGI
# server decodes %2F before routing, and the name is read back from the segment here.
_NAME = r"(?P<name>[^/]+)"
_ROUTE_TABLE: list[tuple[str, str, Handler]] = [
    ("GET", r"/", pages.index),
    ("GET", r"/metrics", pages.metrics),
    ("GET", r"/static/(?P<file>[a-z0-9_-]+\.(?:css|js|svg))", pages.static),
    ("GET", r"/api/queues", pages.api_queues),
    ("GET", rf"/api/queues/{_NAME}/(?P<view>consumers|dead|scheduled|history)", pages.api_view),
    ("GET", rf"/api/queues/{_NAME}", pages.api_queue),
    ("GET", rf"/queues/{_NAME}/dead", pages.dead),
    ("GET", rf"/queues/{_NAME}/scheduled", pages.scheduled),
    ("GET", rf"/queues/{_NAME}/consumers", pages.consumers),
    ("GET", rf"/queues/{_NAME}/job", results_pages.job),
    ("GET", rf"/queues/{_NAME}/history", history_pages.history),
    ("GET", rf"/queues/{_NAME}/jobs", search_pages.search),
    ("POST", rf"/queues/{_NAME}/jobs/act", search_pages.act),
    ("GET", rf"/queues/{_NAME}/running", running_pages.running_list),
    ("GET", rf"/queues/{_NAME}/periodic", schedule_pages.schedules),
    ("POST", rf"/queues/{_NAME}/periodic/add", schedule_pages.add),
    ("POST", rf"/queues/{_NAME}/periodic/(?P<verb>pause|resume|remove)", schedule_pages.change),
    ("POST", rf"/queues/{_NAME}/dead/(?P<verb>retry|delete)", pages.dead_action),
    ("POST", rf"/queues/{_NAME}/scheduled/(?P<verb>run|delete)", pages.scheduled_action),
    ("POST", rf"/queues/{_NAME}/(?P<verb>pause|resume)", pages.flow_action),
    ("POST", rf"/queues/{_NAME}/consumers/recover", pages.recover_consumer),
    ("GET", rf"/queues/{_NAME}", pages.queue),
]
ROUTES = [(method, re.compile(pattern), handler) for method, pattern, handler in _ROUTE_TABLE]

# Queue handles kept for reuse; past this many (names from the URL) the cache starts over.
MAX_CACHED_QUEUES = 1000


class Dashboard:
    """The WSGI application; build it with :func:`gq.dashboard.app`."""

    def __init__(
        self,
        client: Any,
        *,
        queues: Iterable[str] = (),
        read_only: bool = False,
        auth: BasicAuth | None = None,
        secret: bytes | None = None,
        allowed_hosts: Iterable[str] | None = None,
        consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
        refresh: float = 5.0,
        tasks: Mapping[str, Named] | None = None,
    ) -> None:
        self.client = client
        self.tasks: Mapping[str, Named] = tasks or {}
        self.explicit = list(dict.fromkeys(queues))
        self.read_only = read_only
        self.auth = auth
        self.csrf = Csrf(secret)
        self.allowed_hosts = None if allowed_hosts is None else list(allowed_hosts)
        self.consumer_timeout = consumer_timeout
        self.refresh = max(2.0, refresh) if refresh else 0.0  # never a tighter poll than 2 s
        self.templates = _environment()
        self._queues: dict[str, Queue] = {}
        self.metrics_registry: Any = None  # built at the first /metrics scrape

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterator[bytes]:
        request = Request(environ)
        try:
            response = self._respond(request)
        except HTTPError as exc:
            if request.path.startswith("/api/"):
                response = json_response({"error": exc.message}, exc.status)
            else:
                response = self.error_page(request, exc.status, exc.message)
        except Exception:
            log.exception("gq dashboard: %s %s failed", request.method, request.path)
            response = self.error_page(request, 500, "Something went wrong; see the server log.")
        start_response(response.status_line, response.all_headers())
        return iter([b""] if request.method == "HEAD" else [response.body])

    def _respond(self, request: Request) -> Response:
        if self.allowed_hosts is not None and not host_allowed(request, self.allowed_hosts):
            return text_response("unknown Host name (gq dashboard --allowed-host NAME)", 400)
        if request.path == "/healthz":
            return pages.healthz(self, request)
        if self.auth is not None and not self.auth.allows(request.header("Authorization")):
            response = text_response("authentication required", 401)
            response.headers.append(("WWW-Authenticate", 'Basic realm="gq", charset="UTF-8"'))
            return response
        if request.method == "POST":
            self._check_post(request)
        handler, params = self._route(request)
        return handler(self, request, **params)

    def _check_post(self, request: Request) -> None:
        if self.read_only:
            raise HTTPError(403, "This dashboard is read-only.")
        submitted = request.form().get(CSRF_FIELD, [None])[0]
        if cross_site(request) or not self.csrf.accepts(request.cookie(CSRF_COOKIE), submitted):
            raise HTTPError(403, "Refused: the form's security token is missing or stale. "
                                 "Reload the page and try again.")  # fmt: skip

    def _route(self, request: Request) -> tuple[Handler, dict[str, str]]:
        """The first route whose path matches decides: its handler, or 405 for another
        method (so a GET on a change's path is refused, not taken for a queue name)."""
        method = "GET" if request.method == "HEAD" else request.method
        for route_method, pattern, handler in ROUTES:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if route_method != method:
                raise HTTPError(405, "Method not allowed.")
            params = match.groupdict()
            if "name" in params:
                params["name"] = pages.segment_name(params["name"])
            return handler, params
        raise HTTPError(404, "No such page.")

    # -- queues ----------------------------------------------------------------------------

    def queue_names(self) -> list[str]:
        """Queues named on the command line, then those in the registry (no KEYS)."""
        registered = fold(self.client, registered_queues(self.client))
        return [*self.explicit, *(name for name in registered if name not in self.explicit)]

    def queue(self, name: str) -> Queue:
        """The queue ``name``, or a 404 when Redis knows nothing of it (checked before
        anything renders, so a made-up name is never shown back)."""
        queue = self._queues.get(name) or self._handle(name)
        if queue is None:
            raise HTTPError(404, "No such queue.")
        if name not in self._queues:
            known = name in self.explicit or queue.store.exists() or name in self.queue_names()
            if not known:
                raise HTTPError(404, "No such queue.")
            if len(self._queues) >= MAX_CACHED_QUEUES:
                self._queues.clear()
            self._queues[name] = queue
        return queue

    def handles(self, names: Iterable[str]) -> list[Queue]:
        """A handle on each of ``names`` that can be one (a name without a hash tag cannot
        on a cluster)."""
        found = [self._queues.get(name) or self._handle(name) for name in names]
        return [rq for rq in found if rq is not None]

    def _handle(self, name: str) -> Queue | None:
        try:  # a sharded queue's handle by its descriptor (gq/store/shards.py)
            return Queue(name, client=self.client, shards=declared(self.client, [name]).get(name))
        except ConfigurationError:
            return None

    # -- rendering ---------------------------------------------------------------------------

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        token = request.cookie(CSRF_COOKIE)
        headers = []
        if not self.csrf.valid(token):
            token = self.csrf.new_token()
            headers.append(cookie_header(token, request))
        html = self.templates.get_template(template).render(
            root=request.script_name,
            queue_url=lambda name, suffix="": pages.queue_url(request, name, suffix),
            csrf_field=CSRF_FIELD,
            csrf_token=token,
            read_only=self.read_only,
            refresh=self.refresh,
            consumer_timeout=self.consumer_timeout,
            version=__version__,
            **context,
        )
        return Response(status, html.encode("utf-8"), headers=headers)

    def error_page(self, request: Request, status: int, message: str) -> Response:
        try:
            return self.render(request, "error.html", status, code=status, message=message)
        except Exception:  # the template itself failed: plain text, still no details
            log.exception("gq dashboard: the error page failed")
            return text_response(message, status)

    def redis_ok(self) -> bool:
        try:
            self.client.ping()
        except (redis.RedisError, OSError):
            return False
        return True


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("gq.dashboard", "templates"),
        autoescape=True,  # every template, whatever its extension: job data is hostile
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(filters.FILTERS)
    return env
