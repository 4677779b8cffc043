"""The job a log line is about: every log line of a job carries its id, task and queue
(SPEC section 18) as the record's attributes ``gq_job_id``, ``gq_task`` and ``gq_queue``.

- The worker's own lines about a job (a failure, a retry, a cancel) pass them as
  ``extra=fields_of(job)``;
- a task's lines (and its libraries') get them from ``JobFields``, a logging filter
  that reads the job running in this greenlet or thread. ``gq-worker`` puts it on its
  handler; a program that configures logging itself adds it to its own handlers:
  ``handler.addFilter(gq.tasks.joblog.JobFields())``.

Light on purpose (no redis, no gevent): gq.cli.logs imports it before gq-worker patches.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

import msgpack

#: The job a task runs for, per greenlet or thread (greenlet >= 1.0 gives each greenlet
#: its own contextvars context): ``(gq.Job, gq.tasks.envelope.Fields)``, set by gq.dispatch.
CURRENT: contextvars.ContextVar[tuple[Any, Any] | None] = contextvars.ContextVar(
    "gq_current_job", default=None
)

FIELDS = ("gq_job_id", "gq_task", "gq_queue")
_MAGIC = b"\x00gqt"


def fields(job_id: str, task: str, queue: str) -> dict[str, str]:
    """The ``extra`` of a log line about one job."""
    return {"gq_job_id": job_id, "gq_task": task, "gq_queue": queue}


def fields_of(job: Any) -> dict[str, str]:
    """The ``extra`` of a log line about ``job`` (a ``gq.Job``): its task is read from
    its envelope ("" for a byte job). Only on the lines about a job, not per run."""
    return fields(job.id, task_name(job.data), getattr(job, "queue", ""))


def task_name(data: bytes) -> str:
    """The task an envelope names, "" for a byte job or an envelope that does not decode."""
    if data[:4] != _MAGIC:
        return ""
    try:
        body = msgpack.unpackb(data[4:], raw=False, timestamp=3)
    except Exception:  # noqa: BLE001 - a log line never fails; gq.tasks.dispatch says what is wrong
        return ""
    task = body.get("task") if isinstance(body, dict) else None
    return task if isinstance(task, str) else ""


class JobFields(logging.Filter):
    """Adds ``gq_job_id``, ``gq_task`` and ``gq_queue`` to the records logged while a
    task runs (a record that has them from ``extra`` keeps its own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "gq_job_id", None) is None:
            current = CURRENT.get()
            if current is not None:
                job, fields = current
                record.gq_job_id, record.gq_task, record.gq_queue = job.id, fields[0], job.queue
        return True


def suffix(record: logging.LogRecord) -> str:
    """`` job=ID task=NAME queue=Q`` for a record about a job, else ""."""
    job_id = getattr(record, "gq_job_id", None)
    if job_id is None:
        return ""
    task = getattr(record, "gq_task", "") or "-"
    return f" job={job_id} task={task} queue={getattr(record, 'gq_queue', '')}"
