"""gq: a reliable Redis job queue whose worker runs on gevent, wire-compatible with curlyq."""

from __future__ import annotations

import importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

from gq.version import __version__ as __version__

if TYPE_CHECKING:
    from gq.errors import (
        AckJobError,
        ConfigurationError,
        EnvelopeError,
        GQError,
        JobAlreadyExistsError,
        JobCancelled,
        JobTimeout,
        Kill,
        KillJobError,
        MaxBackoffExceededError,
        MessageTooLargeError,
        PermissionDeniedError,
        QueueFullError,
        RateLimited,
        ResultUnavailable,
        Retry,
        RetryJobError,
        ShutdownTimeoutError,
        TaskFailed,
        UnknownTaskError,
    )
    from gq.job import Job
    from gq.jobfilter import JobFilter
    from gq.options import ConsumerOptions
    from gq.periodic import Periodic
    from gq.producer import Producer
    from gq.queue import Queue
    from gq.tasks.app import App
    from gq.tasks.dispatch import CurrentJob, current_job
    from gq.tasks.results import Result
    from gq.tasks.task import Signature, Task
    from gq.tasks.workflows import chain, group
    from gq.worker.consumer import Consumer


__all__ = [
    "AckJobError",
    "App",
    "ConfigurationError",
    "Consumer",
    "ConsumerOptions",
    "CurrentJob",
    "EnvelopeError",
    "GQError",
    "Job",
    "JobAlreadyExistsError",
    "JobCancelled",
    "JobFilter",
    "JobTimeout",
    "Kill",
    "KillJobError",
    "MaxBackoffExceededError",
    "MessageTooLargeError",
    "PermissionDeniedError",
    "Periodic",
    "Producer",
    "Queue",
    "QueueFullError",
    "RateLimited",
    "Result",
    "Retry",
    "RetryJobError",
    "ResultUnavailable",
    "ShutdownTimeoutError",
    "Signature",
    "TaskFailed",
    "Task",
    "UnknownTaskError",
    "chain",
    "current_job",
    "group",
]

# The public names are imported on first use (PEP 562): `import gq.cli.worker` must import
# neither redis nor ssl, because gq-worker monkey-patches before they are imported.
_MODULES = {
    "Consumer": "gq.worker.consumer",
    "Producer": "gq.producer",
    "Job": "gq.job",
    "JobFilter": "gq.jobfilter",
    "ConsumerOptions": "gq.options",
    "Periodic": "gq.periodic",
    "Queue": "gq.queue",
    "App": "gq.tasks.app",
    "Task": "gq.tasks.task",
    "Signature": "gq.tasks.task",
    "Result": "gq.tasks.results",
    "CurrentJob": "gq.tasks.dispatch",
    "current_job": "gq.tasks.dispatch",
    "chain": "gq.tasks.workflows",
    "group": "gq.tasks.workflows",
}


def __getattr__(name: str) -> Any:
    if name in ("aio", "testing"):  # `gq.aio.Producer`, `gq.testing.eager(app)`
        return importlib.import_module(f"gq.{name}")
    if name not in __all__:
        raise AttributeError(f"module 'gq' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULES.get(name, "gq.errors")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


_logging.getLogger("gq").addHandler(_logging.NullHandler())
