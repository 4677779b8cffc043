"""Consumer options: curlyq's names and defaults plus gq's own, validated once (SPEC section 2).

Durations are accepted as float seconds or ``timedelta`` and stored as float seconds.
The running consumer reads ``consumer.opts`` live, so a test may lower a value below its
minimum after construction.
"""

from __future__ import annotations

import difflib
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any, Union

from gq.errors import ConfigurationError

log = logging.getLogger("gq.options")

Duration = Union[float, int, timedelta]

DAY = 24 * 3600.0

# Floors below which a value is raised, with a warning, as curlyq does.
MINIMUMS: dict[str, float] = {
    "poller_poll_duration": 1.0,
    "heartbeat_poll_interval": 1.0,
    "custodian_consumer_timeout": 5.0,
}
#: The shortest lease a consumer can state (the minimums above): a custodian looks at the
#: consumers silent this long, then judges each by the lease it stated (gq/worker/lease.py).
SHORTEST_LEASE = MINIMUMS["heartbeat_poll_interval"] + MINIMUMS["custodian_consumer_timeout"]
#: The default lease of a consumer that states none (a curlyq consumer): curlyq's
#: defaults, 60 s heartbeats + 60 s timeout, so that a live Go consumer is never taken for
#: dead by gq's shorter defaults (``custodian_unstated_lease``).
UNSTATED_LEASE = 120.0

_DURATIONS = {
    "job_max_backoff",
    "shutdown_grace_period",
    "poller_poll_duration",
    "poller_max_backoff",
    "heartbeat_poll_interval",
    "heartbeat_max_backoff",
    "scheduler_poll_interval",
    "scheduler_max_backoff",
    "custodian_poll_interval",
    "custodian_consumer_timeout",
    "custodian_unstated_lease",
    "custodian_max_backoff",
    "job_timeout",
    "dead_max_age",
    "hub_block_warning",
}
# Durations that pace a loop: zero would make it busy-poll Redis (or spin on a failure).
# The others may be zero: no retry delay, no grace period, no job timeout, no dead jobs kept.
_INTERVALS = _DURATIONS - {
    "job_max_backoff",
    "shutdown_grace_period",
    "job_timeout",
    "dead_max_age",
}
AUTO = "auto"
# gq-worker's handlers at once unless told: its handlers mostly wait on I/O (HTTP, a
# database), where greenlets cost little; a Consumer built in code keeps curlyq's 5.
WORKER_CONCURRENCY = 100
_FLAGS = {"scheduler_wake"}
# Counts that must be at least 1; every other count may be 0.
_POSITIVE_COUNTS = {
    "processor_concurrency",
    "poller_buffer_size",
    "poller_buffer_max",
    "scheduler_max_jobs",
    "custodian_max_jobs",
    "dead_max_jobs",
}
# Options where None (or 0) means "no limit".
_OPTIONAL = {
    "shutdown_grace_period",
    "job_timeout",
    "poller_max_attempts",
    "heartbeat_max_attempts",
    "scheduler_max_attempts",
    "custodian_max_attempts",
}


@dataclass
class ConsumerOptions:
    """Every knob of a Consumer; each comment gives the default and the minimum."""

    job_max_attempts: int = 20
    """Default 20. A failing job with ``attempt < job_max_attempts`` is retried, else killed."""
    job_max_backoff: float = 7 * DAY
    """Default 7 days. Cap on the delay before a retry."""
    shutdown_grace_period: float | None = None
    """Default None. How long a stop waits for running handlers; None or 0 waits forever."""
    processor_concurrency: int = 5
    """Default 5 (curlyq's; gq-worker's is 100), minimum 1. Handlers running at once."""
    poller_buffer_size: int | str = AUTO
    """Default "auto", minimum 1. Jobs fetched ahead and held locally: "auto" sizes each
    fetch from the measured rate (SPEC section 5); a number is curlyq's fixed size."""
    poller_buffer_max: int = 1000
    """Default 1,000, minimum 1 (gq). The most jobs "auto" holds ahead."""
    poller_poll_duration: float = 5.0
    """Default 5 s, minimum 1 s. How long one blocking wait for new jobs lasts."""
    poller_max_attempts: int | None = 0
    """Default 0 (never abort). Consecutive poller failures before the consumer aborts."""
    poller_max_backoff: float = 30.0
    """Default 30 s. Cap on the poller's backoff after a failure."""
    heartbeat_poll_interval: float = 5.0
    """Default 5 s, minimum 1 s. How often the consumer proves it is alive (curlyq: 60 s)."""
    heartbeat_max_attempts: int | None = 0
    """Default 0 (never abort)."""
    heartbeat_max_backoff: float = 30.0
    """Default 30 s."""
    scheduler_poll_interval: float = 5.0
    """Default 5 s. How often due scheduled jobs are moved to the queue."""
    scheduler_max_jobs: int = 50
    """Default 50, minimum 1. Jobs moved per pass; a full pass repeats at once."""
    scheduler_max_attempts: int | None = 0
    """Default 0 (never abort)."""
    scheduler_max_backoff: float = 30.0
    """Default 30 s."""
    scheduler_wake: bool = True
    """Default on. The scheduler also wakes at the earliest due time it knows (its own
    retries, the scheduled set's head, a producer's delayed enqueue), not only every
    ``scheduler_poll_interval``; off, due jobs wait for the next poll (curlyq's way)."""
    custodian_poll_interval: float = 5.0
    """Default 5 s (curlyq: 60 s). How often jobs of dead consumers are recovered."""
    custodian_consumer_timeout: float = 20.0
    """Default 20 s (curlyq: 60 s), minimum 5 s. A consumer silent for heartbeat interval +
    this is dead: its lease, stated in its facts, so each consumer is judged by its own."""
    custodian_unstated_lease: float = UNSTATED_LEASE
    """Default 120 s (gq). The lease of a consumer that states none in its facts (a curlyq
    consumer): curlyq's default heartbeat interval + consumer timeout; set it to your Go
    consumers' own if you changed theirs."""
    custodian_max_jobs: int = 50
    """Default 50, minimum 1. Jobs recovered per pass; a full pass repeats at once."""
    custodian_max_attempts: int | None = 0
    """Default 0 (never abort)."""
    custodian_max_backoff: float = 30.0
    """Default 30 s."""
    job_max_recoveries: int = 3
    """Default 3 (gq). Recoveries from crashed consumers in a row before a job goes to dead."""
    job_timeout: float | None = None
    """Default None (gq). Per-job limit; expiry counts as a failed attempt."""
    dead_max_jobs: int = 10_000
    """Default 10,000, minimum 1 (gq). The dead set keeps at most this many jobs."""
    dead_max_age: float = 180 * DAY
    """Default 180 days (gq). Dead jobs older than this are deleted and their ids freed."""
    hub_block_warning: float = 1.0
    """Default 1 s (gq). A hub blocked this long is logged with the blocking stack, and the
    watchdog that stops a handler spinning past ``job_timeout`` looks this often."""

    def __post_init__(self) -> None:
        for field in fields(self):
            name = field.name
            value = getattr(self, name)
            if name in _DURATIONS:
                value = _seconds(name, value, optional=name in _OPTIONAL)
            elif name == "poller_buffer_size" and value == AUTO:
                pass
            elif name in _FLAGS:
                value = _flag(name, value)
            else:
                value = _count(name, value, optional=name in _OPTIONAL)
            setattr(self, name, value)
        for name, floor in MINIMUMS.items():
            if getattr(self, name) < floor:
                value = getattr(self, name)
                log.warning("%s=%r is below its minimum; using %r", name, value, floor)
                setattr(self, name, floor)

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in fields(cls)]

    @classmethod
    def check_names(cls, given: Iterable[str]) -> None:
        """Raise ConfigurationError naming each unknown option and the one meant."""
        names = cls.names()
        unknown = sorted(set(given) - set(names))
        if unknown:
            hints = [f"{name}{_hint(name, names)}" for name in unknown]
            raise ConfigurationError(f"unknown consumer option(s): {', '.join(hints)}")


#: The short names users of other queues (and gq-worker's flags) reach for first.
SHORT_NAMES = {
    "concurrency": "processor_concurrency",
    "buffer_size": "poller_buffer_size",
    "grace_period": "shutdown_grace_period",
}


def _hint(name: str, names: list[str]) -> str:
    key = name.lstrip("-").replace("-", "_")
    meant = SHORT_NAMES.get(key) or next(iter(difflib.get_close_matches(key, names, 1)), None)
    return f" (did you mean {meant}?)" if meant else ""


def _seconds(name: str, value: Any, *, optional: bool) -> Any:
    if value is None:
        if optional:
            return None
        raise ConfigurationError(f"{name} must be a duration, not None")
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ConfigurationError(f"{name} must be seconds (float) or a timedelta, not {value!r}")
    if value < 0:
        raise ConfigurationError(f"{name} must not be negative, got {value!r}")
    if value == 0 and name in _INTERVALS:
        raise ConfigurationError(f"{name} must be more than 0 s (0 would busy-poll Redis)")
    if optional and value == 0:
        return None
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    return value


def _count(name: str, value: Any, *, optional: bool) -> Any:
    if value is None and optional:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        also = ' or "auto"' if name == "poller_buffer_size" else ""
        raise ConfigurationError(f"{name} must be an int{also}, not {value!r}")
    low = 1 if name in _POSITIVE_COUNTS else 0
    if value < low:
        raise ConfigurationError(f"{name} must be at least {low}, got {value!r}")
    return value


#: When a consumer that states no lease in its facts (a curlyq consumer) counts as dead for
#: readers (the dashboard, ``gq stats``, the exporter): a gq consumer is judged by the lease
#: its facts state, whatever its options.
DEFAULT_CONSUMER_TIMEOUT = UNSTATED_LEASE
