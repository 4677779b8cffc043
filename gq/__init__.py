"""gq: a reliable Redis job queue whose worker runs on gevent, wire-compatible with curlyq."""

from gq.consumer import Consumer
from gq.errors import (
    AckJobError,
    ConfigurationError,
    GQError,
    JobAlreadyExistsError,
    JobTimeout,
    KillJobError,
    MaxBackoffExceededError,
    RetryJobError,
    ShutdownTimeoutError,
)
from gq.job import Job
from gq.options import ConsumerOptions
from gq.producer import Producer

__version__ = "0.1.0"

__all__ = [
    "AckJobError",
    "ConfigurationError",
    "Consumer",
    "ConsumerOptions",
    "GQError",
    "Job",
    "JobAlreadyExistsError",
    "JobTimeout",
    "KillJobError",
    "MaxBackoffExceededError",
    "Producer",
    "RetryJobError",
    "ShutdownTimeoutError",
]

import logging as _logging

_logging.getLogger("gq").addHandler(_logging.NullHandler())
