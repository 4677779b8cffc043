"""A worker's name: who it is across restarts, so that a restarted worker takes its crashed
predecessor's jobs back at once instead of after the predecessor's lease (issue 32; Sidekiq
Pro's super_fetch recovers a restarted process's private queues the same way).

A consumer given a name (``gq-worker --name``, by default the host's name and the process's
index under ``--processes``) writes it in its facts. Once registered, it looks at the other
consumers of its queues whose facts carry the same name:

- one whose process is gone is a predecessor that crashed: its jobs are recovered now. On
  this machine the process is looked up (its pid gone, or taken by a process started
  later); on another machine it is gone when its heartbeat stands still for one of its
  heartbeat intervals (live consumers beat on time, from a native thread if need be);
- one that is alive and started first keeps the name: an explicit name is refused
  (``NameInUse``), a default one moves on to the next index (``host-0``, ``host-1``...).
  Two live consumers started at once settle it the same way, by who registered first.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable

import gevent
import psutil

from gq.errors import ConfigurationError, GQError
from gq.store.jobs import RedisQueue
from gq.store.recovery import until_empty
from gq.store.registry import ConsumerReports

log = logging.getLogger("gq.consumer")

#: What a name may hold: it is shown in logs and pages and typed on command lines.
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")
#: How often the heartbeat of a namesake on another machine is read while it is watched.
WATCH_STEP = 0.5
#: Beyond one of its heartbeat intervals, how long a namesake may be late before it is gone.
WATCH_SLACK = 2.0
#: Default names tried at most before giving up (host-0 ... host-999).
MAX_INDEX = 1000


class NameInUse(GQError):
    """Another live consumer has this consumer's name (``.name``, ``.holder``: its facts)."""

    def __init__(self, name: str, holder: Mapping[str, Any]) -> None:
        self.name = name
        self.holder = dict(holder)
        super().__init__(
            f"the name {name!r} is used by a live worker (host {holder.get('host')}, pid "
            f"{holder.get('pid')}, consumer {holder.get('id')}): give each worker its own "
            "--name, or stop that one first"
        )


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigurationError(
            f"a worker's name is 1 to 100 letters, digits, '.', '_' or '-', not {name!r}"
        )
    return name


@dataclass(frozen=True)
class Name:
    """A consumer's name: ``base`` alone, or ``base-index`` (a child of ``--processes``);
    one that ``moves`` (a default name) goes on to the next index while a live worker
    holds it, any other is refused."""

    base: str
    index: int | None = None
    moves: bool = False

    @property
    def text(self) -> str:
        return self.base if self.index is None else f"{self.base}-{self.index}"

    def next(self) -> Name:
        return replace(self, index=(self.index or 0) + 1)


def default_name(slot: int = 0) -> Name:
    """gq-worker's name without ``--name``: the host's name (its other characters as '-')
    and the process's index under ``--processes``."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:90] or "worker"
    return Name(host, slot, moves=True)


def this_process() -> dict[str, Any]:
    """What tells this process apart from a later one with the same pid on this machine."""
    return {"machine": machine_id(), "process_started": psutil.Process().create_time()}


def machine_id() -> str:
    """The host's name, and on Linux its boot and pid namespace: two containers with one
    host name are two machines here (their pids mean nothing to each other)."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            parts.append(boot.read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        pass
    return "/".join(parts)


def process_gone(facts: Mapping[str, Any]) -> bool:
    """Whether the process a namesake's facts describe is gone, judged on this machine."""
    pid, started = facts.get("pid"), facts.get("process_started")
    if not isinstance(pid, int) or not isinstance(started, (int, float)):
        return False  # cannot tell: watched as if on another machine
    try:
        return abs(psutil.Process(pid).create_time() - started) > 0.01  # a later process
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


class Claim:
    """Claims ``name`` for the consumer ``consumer_id`` on ``queues`` (see the module).
    ``announce(name)`` writes the consumer's facts with that name; ``recover(queue,
    keys)`` recovers the given consumers' jobs now and returns how many."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        announce: Callable[[str], None],
        recover: Callable[[RedisQueue, list[str]], int],
        context: str,
    ) -> None:
        self._queues = queues
        self._id = consumer_id
        self._announce = announce
        self._recover = recover
        self._context = context
        self.process = this_process()  # what the facts carry besides the name

    def claim(self, name: Name) -> str:
        """The name this consumer holds now (NameInUse if ``name`` is held and does not
        move on); crashed namesakes' jobs are recovered on the way."""
        for _ in range(MAX_INDEX):
            self._announce(name.text)
            holder = self._live_holder(name.text)
            if holder is None:
                return name.text
            if not name.moves:
                raise NameInUse(name.text, holder)
            name = name.next()
        raise NameInUse(name.text, {})

    def _live_holder(self, name: str) -> dict[str, Any] | None:
        """The facts of a live namesake that registered before this consumer, if any; the
        crashed ones' jobs are recovered."""
        for queue in self._queues.values():
            admin = ConsumerReports(queue.client, queue.keys.name)
            for entry in self._namesakes(admin, name):
                if self._alive(admin, entry):
                    if self._first(entry):
                        return entry
                    continue
                self._take_over(queue, entry)
        return None

    def _namesakes(self, admin: ConsumerReports, name: str) -> list[dict[str, Any]]:
        found = [(cid, seen) for cid, seen in admin.heartbeats() if cid != self._id]
        facts = admin.consumer_facts([cid for cid, _ in found])
        return [
            {**fact, "id": cid, "heartbeat_at": seen}
            for (cid, seen), fact in zip(found, facts)
            if fact is not None and fact.get("name") == name
        ]

    def _alive(self, admin: ConsumerReports, entry: dict[str, Any]) -> bool:
        if entry.get("machine") == self.process["machine"]:
            return not process_gone(entry)
        return self._beats(admin, entry)

    def _beats(self, admin: ConsumerReports, entry: dict[str, Any]) -> bool:
        """Whether a namesake on another machine heartbeats within one of its intervals."""
        interval = entry.get("heartbeat_interval")
        wait = (interval if isinstance(interval, (int, float)) else 60.0) + WATCH_SLACK
        log.info("%s: a worker named %r on %s may still run; watching its heartbeat for "
                 "up to %.0f s", self._context, entry.get("name"), entry.get("host"),
                 wait)  # fmt: skip
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            seen = dict(admin.heartbeats()).get(entry["id"])
            if seen is None or seen != entry["heartbeat_at"]:
                return seen is not None  # it beat again; deregistered or recovered: gone
            gevent.sleep(WATCH_STEP)
        return False

    def _first(self, entry: Mapping[str, Any]) -> bool:
        """Whether the namesake started before this consumer (ties: the smaller id)."""
        mine = (self.process["process_started"], self._id)
        return (entry.get("process_started") or 0.0, str(entry["id"])) < mine

    def _take_over(self, queue: RedisQueue, entry: Mapping[str, Any]) -> None:
        key = queue.keys.inflight(str(entry["id"]))
        total = until_empty(lambda: self._recover(queue, [key]))
        log.warning("%s: took over the name %r from consumer %s (pid %s on %s), which is "
                    "gone: recovered its %d job(s) in flight now instead of at the end of "
                    "its lease", self._context, entry.get("name"), entry["id"],
                    entry.get("pid"), entry.get("host"), total)  # fmt: skip
