"""The dashboard's routes: pages, JSON views and the changes (POSTs) they offer."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Callable
from urllib.parse import quote, unquote

from gq.dashboard import chart, model, results_pages
from gq.dashboard.http import HTTPError, Request, Response, json_response, redirect, text_response
from gq.errors import ConfigurationError, ConsumerAlive
from gq.store.admin import Entry, QueueAdmin
from gq.store.base import MAX_BATCH

if TYPE_CHECKING:
    from gq.dashboard.site import Site

# The queues page shows at most this many queues (each costs a few round trips).
MAX_INDEX = 500
PER_PAGE, MAX_PER_PAGE = 25, 100
MAX_MINUTES = 1440  # the history kept in Redis: 24 h
STATIC_TYPES = {
    "css": "text/css; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "svg": "image/svg+xml",
}
# What a change reports back, by fixed code: the page never echoes what it was sent.
MESSAGES = {
    "retried": "{n} job(s) queued again.",
    "deleted": "{n} job(s) deleted.",
    "ran": "{n} job(s) moved to the queue to run now.",
    "paused": "Queue paused: consumers fetch nothing until it is resumed.",
    "resumed": "Queue resumed (and a RateLimited hold lifted, if there was one).",
    "none": "No job was selected.",
    "recovered": "{n} job(s) of the consumer handed back to the queue.",
}

Operation = Callable[[Sequence[str]], list[bool]]
Page = Callable[[int, int], list[Entry]]


def _int_arg(request: Request, name: str, default: int, low: int, high: int) -> int:
    """A numeric query argument, clamped into [low, high]; the default when unreadable."""
    try:
        value = int(request.arg(name) or default)
    except ValueError:
        value = default
    return max(low, min(high, value))


# -- pages ---------------------------------------------------------------------------------


def index(d: Site, request: Request) -> Response:
    names = d.queue_names()
    rows = [model.summary(q.store, d.consumer_timeout) for q in d.handles(names[:MAX_INDEX])]
    return d.render(request, "queues.html", queues=rows, hidden=max(0, len(names) - MAX_INDEX))


def queue(d: Site, request: Request, name: str) -> Response:
    rq = d.queue(name).store
    return d.render(
        request,
        "queue.html",
        queue=model.summary(rq, d.consumer_timeout),
        flow=model.flow(rq),
        groups=model.groups(rq),
        consumers=model.consumers(rq, d.consumer_timeout),
        chart=chart.throughput(model.history(rq, 60)),
        message=_message(request),
        results=results_pages.recent(rq),
        show_shards=request.arg("shards") == "1",  # a sharded queue's table of its shards
    )


def consumers(d: Site, request: Request, name: str) -> Response:
    rq = d.queue(name).store
    return d.render(
        request,
        "consumers.html",
        queue=model.summary(rq, d.consumer_timeout),
        consumers=model.consumers(rq, d.consumer_timeout),
        message=_message(request),
    )


def dead(d: Site, request: Request, name: str) -> Response:
    return _job_list(d, request, name, "dead")


def scheduled(d: Site, request: Request, name: str) -> Response:
    return _job_list(d, request, name, "scheduled")


def _job_list(d: Site, request: Request, name: str, state: str) -> Response:
    rq = d.queue(name).store
    summary = model.summary(rq, d.consumer_timeout)
    page, per = _paging(request, summary[state])
    entries = _pager(rq, state)((page - 1) * per, per)
    return d.render(
        request,
        f"{state}.html",
        queue=summary,
        jobs=model.job_rows(entries),
        page=page,
        per=per,
        pages=max(1, -(-summary[state] // per)),
        message=_message(request),
    )


def _paging(request: Request, total: int) -> tuple[int, int]:
    per = _int_arg(request, "per", PER_PAGE, 1, MAX_PER_PAGE)
    last = max(1, -(-total // per))
    return _int_arg(request, "page", 1, 1, last), per


def _pager(rq: QueueAdmin, state: str) -> Page:
    return rq.dead_page if state == "dead" else rq.scheduled_page


def _message(request: Request) -> str | None:
    template = MESSAGES.get(request.arg("done") or "")
    if template is None:
        return None
    return template.format(n=_int_arg(request, "n", 0, 0, 10**9))


# -- changes -------------------------------------------------------------------------------


def dead_action(d: Site, request: Request, name: str, verb: str) -> Response:
    rq = d.queue(name).store
    operation = rq.delete_dead if verb == "delete" else _retry_dead(rq)
    done = _apply(request, rq, operation, "dead")
    return _after(request, name, "/dead", "deleted" if verb == "delete" else "retried", done)


def scheduled_action(d: Site, request: Request, name: str, verb: str) -> Response:
    rq = d.queue(name).store
    operation = rq.delete_scheduled if verb == "delete" else rq.run_scheduled
    done = _apply(request, rq, operation, "scheduled")
    return _after(request, name, "/scheduled", "deleted" if verb == "delete" else "ran", done)


def flow_action(d: Site, request: Request, name: str, verb: str) -> Response:
    """Pause or resume the queue (read-only mode and the CSRF check came first)."""
    pause = verb == "pause"
    queue = d.queue(name)
    (queue.pause if pause else queue.resume)()
    return redirect(f"{queue_url(request, name)}?done={'paused' if pause else 'resumed'}")


def recover_consumer(d: Site, request: Request, name: str) -> Response:
    """Hand back a silent or dead consumer's jobs now (``gq consumers --recover``); one
    that heartbeats on time is refused, as the CLI refuses it without --force."""
    queue = d.queue(name)
    consumer_id = request.form().get("consumer", [""])[0]
    try:
        moved = queue.recover_consumer(consumer_id)
    except (ConsumerAlive, ConfigurationError) as exc:
        raise HTTPError(409, str(exc)) from None
    return _after(request, name, "/consumers", "recovered", moved)


def _retry_dead(rq: QueueAdmin) -> Operation:
    # Attempts are kept, as `gq dead retry` keeps them by default: a job that fails again
    # goes straight back to dead rather than through its whole retry schedule.
    return lambda ids: rq.retry_dead([(job_id, None) for job_id in ids])


def _apply(request: Request, rq: QueueAdmin, operation: Operation, state: str) -> int | None:
    """Run ``operation`` on the posted ids, or with ``all=1`` on the whole set; the count
    done, or None when nothing was selected."""
    form = request.form()
    if form.get("all", [""])[0] == "1":
        return rq.work_through(state, operation)
    ids = list(dict.fromkeys(i for i in form.get("id", []) if i))
    if len(ids) > MAX_BATCH:
        raise HTTPError(400, f"At most {MAX_BATCH} jobs at once; use 'all' for more.")
    return sum(operation(ids)) if ids else None




def _after(request: Request, name: str, suffix: str, code: str, done: int | None) -> Response:
    outcome = "done=none" if done is None else f"done={code}&n={done}"
    return redirect(f"{queue_url(request, name, suffix)}?{outcome}")


def queue_url(request: Request, name: str, suffix: str = "") -> str:
    """The path of a queue's page under the dashboard's mount point: the name is one
    segment, so no character of it can end or change the path."""
    return f"{request.script_name}/queues/{name_segment(name)}{suffix}"


def name_segment(name: str) -> str:
    """``name`` as one URL path segment that survives the server's decoding: "/" and "%"
    are escaped twice ("/" -> %252F), since PATH_INFO arrives with %2F already decoded
    into a "/" that routing could not tell from the path's own; the rest once."""
    return quote(name.replace("%", "%25").replace("/", "%2F"), safe="")


def segment_name(segment: str) -> str:
    """The queue name in a path segment the server decoded once (``name_segment``)."""
    return unquote(segment)


# -- JSON, health, static ------------------------------------------------------------------


def api_queues(d: Site, request: Request) -> Response:
    names = d.queue_names()[:MAX_INDEX]
    rows = [model.summary(q.store, d.consumer_timeout) for q in d.handles(names)]
    return json_response({"queues": rows})


def api_queue(d: Site, request: Request, name: str) -> Response:
    rq = d.queue(name).store
    summary = {**model.summary(rq, d.consumer_timeout), **model.flow(rq)}
    return json_response({**summary, "consumers": model.consumers(rq, d.consumer_timeout)})


def api_view(d: Site, request: Request, name: str, view: str) -> Response:
    rq = d.queue(name).store
    if view == "consumers":
        return json_response({"consumers": model.consumers(rq, d.consumer_timeout)})
    if view == "history":
        minutes = _int_arg(request, "minutes", 60, 1, MAX_MINUTES)
        return json_response({"history": model.history(rq, minutes)})
    page, per = _paging(request, rq.counts()[view])
    rows = model.job_rows(_pager(rq, view)((page - 1) * per, per))
    return json_response({"jobs": rows, "page": page, "per": per})


def metrics(d: Site, request: Request) -> Response:
    """The queue gauges in Prometheus' text format (gq.metrics; the extra gq[metrics])."""
    from gq import metrics as gq_metrics

    try:
        client = gq_metrics.prometheus()
    except gq_metrics.MetricsUnavailableError as exc:
        raise HTTPError(501, str(exc)) from None
    if d.metrics_registry is None:
        d.metrics_registry = gq_metrics.queue_metrics_registry(
            d.client, d.explicit or None, d.consumer_timeout
        )
    body = client.generate_latest(d.metrics_registry)
    return Response(200, body, client.CONTENT_TYPE_LATEST)


def healthz(d: Site, request: Request) -> Response:
    return text_response("ok") if d.redis_ok() else text_response("Redis unreachable", 503)


def static(d: Site, request: Request, file: str) -> Response:
    resource = resources.files("gq.dashboard").joinpath("static").joinpath(file)
    if not resource.is_file():
        raise HTTPError(404, "No such file.")
    return Response(200, resource.read_bytes(), STATIC_TYPES[file.rsplit(".", 1)[1]])
