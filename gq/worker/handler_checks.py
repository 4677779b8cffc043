"""What the processor refuses of a handler: an ``async def`` one at start, an awaitable
returned instead of a job run, and a GreenletExit raised by a handler (a failed attempt,
not a stop). gq runs plain (gevent) handlers only until async handlers land (issue #17);
until then a coroutine never awaited would have its job acknowledged without running.
"""

from __future__ import annotations

import inspect

from gq.errors import ConfigurationError


def refuse_async(handler: object) -> None:
    """Raise ConfigurationError for an ``async def`` handler: gq runs none yet, and its
    coroutine, never awaited, would have its job acknowledged without running."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - a callable object's method
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call):
        raise ConfigurationError(
            f"handler {handler!r} is an async def function: gq runs plain (gevent) "
            "handlers only; make it a plain def"
        )


def refuse_awaitable(result: object) -> None:
    """A handler that returned an awaitable did not run its job: close it (no "never
    awaited" warning) and fail the attempt, so that the job is retried, never acknowledged."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        raise TypeError(
            f"the handler returned an awaitable ({type(result).__name__}) instead of running "
            "the job: gq runs plain (gevent) handlers only"
        )


class GreenletExitRaised(Exception):
    """A handler raised gevent.GreenletExit outside a forced stop: a failed attempt."""

    def __init__(self) -> None:
        super().__init__("the handler raised gevent.GreenletExit (not a stop of gq's)")
