"""Sentry for gq tasks (``pip install 'gq[sentry]'``, the official ``sentry-sdk``).

    import sentry_sdk
    import gq.contrib.sentry

    sentry_sdk.init(dsn=...)
    gq.contrib.sentry.instrument(app)

An attempt that ends in an error is reported once, with the job's id, task, queue and
attempt (tags ``gq.job_id``, ``gq.task``, ``gq.queue``; ``extra["gq-job"]``) and its
arguments, scrubbed as the SDK scrubs: as ``[Filtered]`` unless ``send_default_pii``
is on (or the SDK's ``data_collection`` says ``queues``), then through the client's
own ``event_scrubber`` (its denylist: ``password``, ``token``, ``api_key``...). The
outcomes the user asked for are not errors and are not reported: ``gq.Retry``,
``gq.Kill``, ``gq.RateLimited``, a cancel, a worker's stop; nor the exception types in
``ignore``. The worker's own log line about a reported failure is not a second event
(the SDK's logging integration still reports what gq only logs). The trace of the
enqueueing code continues in the worker (``sentry-trace`` and ``baggage`` in the
envelope's headers), as in the SDK's own queue integrations. The local variables of
gq's own frames are left out of a report (they hold the arguments).
Everything is read from the client at each job: ``instrument`` before or after
``sentry_sdk.init`` both work, and with no client nothing is done.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import sentry_sdk
from sentry_sdk.scope import add_global_event_processor, should_send_default_pii
from sentry_sdk.utils import event_from_exception

from gq.tasks.app import App
from gq.tasks.hooks import Attempt, Enqueueing, outcome_of

#: What the SDK puts where it leaves a value out (sentry_sdk.utils's own constant).
FILTERED = "[Filtered]"

#: The trace headers the SDK continues (its own names: other languages' SDKs read them).
TRACE_HEADERS = ("sentry-trace", "baggage")


#: Set on an exception once reported, so that the worker's log line about the same
#: failure does not become a second event through the SDK's logging integration.
_REPORTED = "__gq_sentry_reported__"
_processor_added = False


def instrument(app: App, *, ignore: tuple[type[BaseException], ...] = ()) -> App:
    """Report the failed attempts of ``app``'s jobs to Sentry, and carry the trace
    across the enqueue; ``ignore``: exception types never reported."""
    global _processor_added
    if not _processor_added:
        # Not ignore_logger("gq.processor"): what gq only logs (a byte handler's failure,
        # an unknown task, a fatal error) must still reach Sentry through the logs.
        add_global_event_processor(_drop_repeat)
        _processor_added = True
    app.on_enqueue(_propagate)
    app.before_job(lambda attempt: _job_scope(attempt, ignore))
    return app


def _propagate(event: Enqueueing) -> None:
    if not sentry_sdk.get_client().is_active():
        return
    for name, value in (("sentry-trace", sentry_sdk.get_traceparent()),
                        ("baggage", sentry_sdk.get_baggage())):  # fmt: skip
        if value and name not in event.headers:
            event.headers[name] = value


@contextmanager
def _job_scope(attempt: Attempt, ignore: tuple[type[BaseException], ...]) -> Iterator[None]:
    if not sentry_sdk.get_client().is_active():
        yield
        return
    with sentry_sdk.isolation_scope() as scope:
        scope.clear_breadcrumbs()
        for key, value in _tags(attempt).items():
            scope.set_tag(key, value)
        scope.add_event_processor(lambda event, hint: _describe(event, attempt))
        with _transaction(attempt) as transaction:
            try:
                yield
            except BaseException as exc:
                transaction.set_status("internal_error")
                if outcome_of(exc) == "failed" and not isinstance(exc, ignore):
                    _capture(exc)
                raise


def _tags(attempt: Attempt) -> dict[str, str]:
    return {"gq.job_id": attempt.id, "gq.task": attempt.task, "gq.queue": attempt.queue,
            "gq.attempt": str(attempt.attempt)}  # fmt: skip


def _transaction(attempt: Attempt) -> Any:
    headers = {k: v for k, v in attempt.headers.items() if k in TRACE_HEADERS}
    transaction = sentry_sdk.continue_trace(
        headers, op="queue.process", name=attempt.task, source="task", origin="auto.queue.gq"
    )
    transaction.set_data("messaging.system", "gq")
    transaction.set_data("messaging.message.id", attempt.id)
    transaction.set_data("messaging.destination.name", attempt.queue)
    transaction.set_data("messaging.message.retry.count", attempt.attempt)
    return sentry_sdk.start_transaction(transaction)


def _capture(exc: BaseException) -> None:
    with suppress(AttributeError, TypeError):  # (an exception without a __dict__)
        setattr(exc, _REPORTED, True)
    client = sentry_sdk.get_client()
    event, hint = event_from_exception(
        exc, client_options=client.options, mechanism={"type": "gq", "handled": False}
    )
    sentry_sdk.capture_event(event, hint=hint)


def _drop_repeat(event: Any, hint: Any) -> Any:
    """None for a second event about an exception this integration reported (the
    worker's error line about it, through the logging integration)."""
    exc_info = (hint or {}).get("exc_info")
    error = exc_info[1] if exc_info else None
    if error is None or not getattr(error, _REPORTED, False):
        return event
    values = (event.get("exception") or {}).get("values") or [{}]
    return event if (values[-1].get("mechanism") or {}).get("type") == "gq" else None


def _describe(event: Any, attempt: Attempt) -> Any:
    event["transaction"] = attempt.task
    job: dict[str, Any] = {"id": attempt.id, "task": attempt.task, "queue": attempt.queue,
                           "attempt": attempt.attempt}  # fmt: skip
    if _send_arguments():
        job["args"], job["kwargs"] = _scrubbed(list(attempt.args), dict(attempt.kwargs))
    else:
        job["args"] = job["kwargs"] = FILTERED
    event.setdefault("extra", {})["gq-job"] = job
    _drop_gq_locals(event)
    return event


def _drop_gq_locals(event: Any) -> None:
    """The local variables of gq's own frames hold the job's envelope, whose reprs
    would carry the arguments around the scrubber: they are left out (the task's own
    frames keep theirs, scrubbed by the SDK)."""
    for value in (event.get("exception") or {}).get("values") or []:
        for frame in (value.get("stacktrace") or {}).get("frames") or []:
            if str(frame.get("module") or "").startswith("gq."):
                frame.pop("vars", None)


def _send_arguments() -> bool:
    options = sentry_sdk.get_client().options
    collection = options.get("data_collection") or {}
    if collection.get("provided_by_user"):  # (sentry-sdk's newer option, when given)
        return bool(collection.get("queues"))
    return should_send_default_pii()


def _scrubbed(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The arguments with the client's scrubber applied (keyword names, and the keys of
    the maps among the arguments, on its denylist are replaced by ``[Filtered]``)."""
    scrubber = sentry_sdk.get_client().options.get("event_scrubber")
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    if scrubber is not None:
        scrubber.scrub_dict(kwargs)
        scrubber.scrub_list(args)
    return args, kwargs
