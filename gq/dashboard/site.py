"""What a page needs of the dashboard (``gq.dashboard.application.Dashboard`` is one), so
that the pages depend on this and the application on the pages, not both ways."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from gq.dashboard.http import Request, Response
from gq.jobfilter import Named
from gq.queue import Queue


class Site(Protocol):
    client: Any
    explicit: list[str]
    consumer_timeout: float
    metrics_registry: Any  # built at the first /metrics scrape
    tasks: Mapping[str, Named]  # an app's, for the searches by an argument's name

    def queue_names(self) -> list[str]: ...

    def queue(self, name: str) -> Queue: ...

    def handles(self, names: Iterable[str]) -> list[Queue]: ...

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response: ...

    def redis_ok(self) -> bool: ...
