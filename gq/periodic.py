"""Periodic schedules and their occurrences (SPEC section 11).

A ``Periodic`` is a rule (a cron expression in a time zone, or a fixed interval) plus the
data of the job each occurrence enqueues. Occurrences are whole unix seconds, computed
from a time the caller gives (the consumer gives the Redis server's time, never its
own clock): ``latest(now)`` is the most recent occurrence at or before ``now``,
``next_after(t)`` the first one after ``t``. Every consumer computes the same
occurrences from the same rule, which is what lets the atomic script (periodic.lua)
pick exactly one enqueue per occurrence with no leader.

Cron rules and time zones, DST included, come from cronsim (extra ``gq[cron]``), which
follows Debian cron: a time that a spring-forward skips runs at the first minute after
the change, and a time that a fall-back repeats runs once, at its first instance.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Union

from gq.errors import ConfigurationError

if TYPE_CHECKING:
    from gq.store.admin import QueueAdmin

# A name goes into job ids (periodic:<name>:<occurrence>) and log lines: printable, no spaces.
_NAME = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")
# An occurrence with no next one (a cron rule whose later matches are over 50 years
# away) is followed by this "never", which every server time is below.
NEVER = 10**15

Interval = Union[float, int, timedelta]


def _zone(name: str, tz: str) -> tzinfo:
    if tz == "UTC":  # no tz database needed for the default
        return timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(f"Periodic {name!r}: unknown time zone {tz!r}") from exc


def _seconds(name: str, every: Any) -> int:
    if isinstance(every, timedelta):
        every = every.total_seconds()
    if isinstance(every, bool) or not isinstance(every, (int, float)):
        raise ConfigurationError(
            f"Periodic {name!r}: every must be seconds or a timedelta, not {every!r}"
        )
    if not every >= 1 or every != int(every):
        # Occurrences are job ids in whole unix seconds; sub-second rules would collide.
        raise ConfigurationError(
            f"Periodic {name!r}: every must be a whole number of seconds >= 1, not {every!r}"
        )
    return int(every)


def _cronsim() -> Any:
    try:
        import cronsim
    except ImportError as exc:
        raise ConfigurationError("cron rules need cronsim: pip install 'gq[cron]'") from exc
    return cronsim


@dataclass(frozen=True)
class Periodic:
    """Enqueue a job with ``data`` at every occurrence of ``cron`` (in time zone ``tz``)
    or ``every`` seconds (or a timedelta; counted from the unix epoch, so every consumer
    agrees on the instants). Its job ids are ``periodic:<name>:<occurrence>``. ``queue``:
    the queue its jobs go on (and its state is kept in); None, the consumer's first."""

    name: str
    cron: str | None = None
    every: Interval | None = None
    data: bytes = b""
    tz: str = "UTC"
    queue: str | None = None
    period: int | None = field(default=None, init=False, repr=False, compare=False)
    zone: tzinfo = field(default=timezone.utc, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigurationError(
                f"a Periodic name is 1-200 printable characters without spaces, not {self.name!r}"
            )
        if not isinstance(self.data, bytes):
            raise ConfigurationError(
                f"Periodic {self.name!r}: data must be bytes, not {type(self.data).__name__}"
            )
        if self.queue is not None:
            from gq.store.config import check_queue_name

            check_queue_name(self.queue)
        if (self.cron is None) == (self.every is None):
            raise ConfigurationError(
                f"Periodic {self.name!r}: give exactly one of cron= and every="
            )
        if self.every is not None:
            self._set_every()
        else:
            self._set_cron()

    def _set_every(self) -> None:
        if self.tz != "UTC":
            raise ConfigurationError(
                f"Periodic {self.name!r}: tz applies to cron rules only "
                f"(every= counts seconds, which no time zone changes)"
            )
        seconds = _seconds(self.name, self.every)
        object.__setattr__(self, "every", seconds)
        object.__setattr__(self, "period", seconds)

    def _set_cron(self) -> None:
        if not isinstance(self.cron, str):
            raise ConfigurationError(
                f"Periodic {self.name!r}: cron must be text, not {self.cron!r}"
            )
        zone = _zone(self.name, self.tz)
        cron = " ".join(self.cron.split())
        object.__setattr__(self, "cron", cron)
        object.__setattr__(self, "zone", zone)
        lib = _cronsim()
        try:
            next(lib.CronSim(cron, datetime.now(zone)))
        except lib.CronSimError as exc:
            raise ConfigurationError(
                f"Periodic {self.name!r}: bad cron rule {cron!r}: {exc}"
            ) from exc
        except StopIteration as exc:
            raise ConfigurationError(
                f"Periodic {self.name!r}: cron rule {cron!r} never matches"
            ) from exc

    # -- occurrences --------------------------------------------------------------------

    @property
    def rule(self) -> str:
        """The rule as stored in Redis: "every<TAB>seconds<TAB>UTC" or "cron<TAB>rule<TAB>tz"
        (the script compares it to notice a changed rule; `gq periodic list` shows it)."""
        if self.period is not None:
            return f"every\t{self.period}\tUTC"
        return f"cron\t{self.cron}\t{self.tz}"

    @property
    def summary(self) -> str:
        """The rule for a human: "every 30s" or "0 3 * * * Europe/Paris"."""
        return f"every {self.period}s" if self.period is not None else f"{self.cron} {self.tz}"

    def latest(self, now: float) -> int | None:
        """The most recent occurrence at or before ``now`` (None if none in 50 years)."""
        if self.period is not None:
            return math.floor(now) // self.period * self.period
        return self._cron_latest(math.floor(now))

    def next_after(self, when: float) -> int:
        """The first occurrence strictly after ``when`` (NEVER if none in 50 years)."""
        if self.period is not None:
            return (math.floor(when) // self.period + 1) * self.period
        return self._cron_step(math.floor(when), reverse=False) or NEVER

    def _cron_latest(self, now: int) -> int | None:
        # Reverse iteration from one second past now; cronsim before 2.8 (the versions
        # Python < 3.11 gets) skips the start's own minute there, so step forward while
        # a later occurrence is still at or before now.
        found = self._cron_step(now + 1, reverse=True)
        while found is not None:
            following = self._cron_step(found, reverse=False)
            if following is None or following <= found or following > now:
                break
            found = following
        return found

    def _cron_step(self, start: int, *, reverse: bool) -> int | None:
        lib = _cronsim()
        try:
            found = next(
                lib.CronSim(self.cron, datetime.fromtimestamp(start, self.zone), reverse=reverse)
            )
        except StopIteration:
            return None
        return int(found.timestamp())

    def job_id(self, occurrence: int) -> str:
        return f"periodic:{self.name}:{occurrence}"


def check_schedule(schedule: Any) -> list[Periodic]:
    """A list of ``Periodic`` with distinct names, or ConfigurationError saying what is wrong."""
    if schedule is None:
        return []
    if isinstance(schedule, (str, bytes)) or not isinstance(schedule, (list, tuple)):
        raise ConfigurationError(
            f"periodic must be a list of gq.Periodic, not {type(schedule).__name__}"
        )
    names: set[str] = set()
    for item in schedule:
        if not isinstance(item, Periodic):
            raise ConfigurationError(
                f"periodic must be a list of gq.Periodic; it holds a {type(item).__name__}"
            )
        if item.name in names:
            raise ConfigurationError(f"two periodic schedules are named {item.name!r}")
        names.add(item.name)
    return list(schedule)


# -- what `gq periodic list` (and the dashboard) show ------------------------------------


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule as Redis knows it: its rule, the last occurrence enqueued and the
    next one (None when the rule cannot be evaluated here, e.g. without gq[cron])."""

    name: str
    kind: str
    rule: str
    tz: str
    last: int | None
    next: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "rule": self.rule,
            "tz": self.tz,
            "last": self.last,
            "next": self.next,
        }


def describe(queue: QueueAdmin) -> list[ScheduleInfo]:
    """Every periodic schedule of ``queue`` (written by its consumers), by name."""
    now = queue.server_time()
    return [
        _info(name, text, cursor, last, now)
        for name, (text, cursor, last) in queue.periodic_state().items()
    ]


def _info(
    name: str, text: str | None, cursor: int | None, last: int | None, now: float
) -> ScheduleInfo:
    parts = (text or "").split("\t")
    kind, rule, tz = parts if len(parts) == 3 else ("?", text or "", "")
    schedule = from_rule(name, kind, rule, tz)
    upcoming = None
    if schedule is not None:
        # Occurrences up to the cursor are handled; a consumer enqueues the first after it.
        upcoming = schedule.next_after(max(now, cursor or 0))
    return ScheduleInfo(name, kind, rule, tz, last, upcoming if upcoming != NEVER else None)


def from_rule(name: str, kind: str, rule: str, tz: str) -> Periodic | None:
    """The schedule a stored rule describes, or None if it cannot be rebuilt here."""
    try:
        if kind == "every":
            return Periodic(name, every=int(rule))
        if kind == "cron":
            return Periodic(name, cron=rule, tz=tz)
    except (ConfigurationError, ValueError):
        pass
    return None
