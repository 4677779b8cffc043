"""Handlers that never yield (SPEC section 6): the blocked-hub report and the watchdog.

gevent's monitor thread (``gevent.config.monitor_thread``) notices a hub that has not
switched greenlets for ``max_blocking_time`` and names the greenlet that holds it. gq turns
it on with ``hub_block_warning`` as that time. gevent's own report renders the locals of
every greenlet (pprint), which takes seconds in a worker with thousands of handlers, on
the GIL, while the hub is already blocked; so gq keeps gevent's thread and switch tracer
but has the thread run ``_check`` in its place: the blocking greenlet's stack only, sent
as the same ``EventLoopBlocked`` event (gq.metrics counts them). From the event:

- it logs the blocked hub with the blocking greenlet's stack (once per episode, through
  logging, so gq-worker's JSON logs stay JSON), instead of gevent's print to stderr;
- when the blocking greenlet is a handler past its ``job_timeout`` (the processor keeps
  its deadline with ``arm``), it interrupts the main thread with a signal whose
  handler raises ``JobTimeout`` in that handler: a ``gevent.Timeout`` cannot fire while
  the hub is held. The attempt then fails as any timed-out attempt does.

A coroutine that never awaits holds the asyncio loop's greenlet, and so the hub: that
greenlet names its current task in ``CURRENT``, and the report and the deadline are the
task's (``hand_over`` gives it the handler's while it runs; the JobTimeout then ends the task).

C code that holds the main thread without running Python (a long C call) cannot be
interrupted this way; the thread heartbeat (gq.worker.loops.ThreadHeartbeat) then gives up after
``custodian_consumer_timeout`` so that the lease ends and the jobs are recovered.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
import traceback
from types import FrameType
from typing import Any, Callable

import gevent
from gevent import events, monkey

from gq.errors import JobTimeout

log = logging.getLogger("gq.watchdog")

# The signal that carries the interruption. SIGURG's default action is to ignore it, so a
# late one after gq restored the previous handler does nothing; nothing else in a Python
# worker uses it.
INTERRUPT = signal.SIGURG

# Handler greenlet -> (monotonic deadline, timeout) while it runs a job with a timeout;
# an asyncio task -> the same while it runs an async handler's coroutine. Written only
# through arm, hand_over and disarm.
_DEADLINES: dict[Any, tuple[float, float]] = {}

#: A greenlet that runs others' work (the asyncio loop's) -> what it runs now (its task),
#: so that a report names the coroutine and a deadline is found for it.
CURRENT: dict[Any, Callable[[], object]] = {}


class _State:
    users = 0
    tracer: Any = None
    previous_handler: Any = None
    main_thread = 0
    last_blocker: Any = None
    last_report = 0.0


def enable(hub_block_warning: float) -> bool:
    """Turn on the monitor and the watchdog for one consumer (counted; see ``disable``).

    Returns False where it cannot work: outside the main thread (signals go there).
    """
    if _State.users == 0:
        try:
            _start()
        except ValueError as exc:  # signal.signal outside the main thread
            log.warning("no watchdog for handlers that never yield: %s", exc)
            return False
    gevent.config.max_blocking_time = hub_block_warning
    _State.users += 1
    return True


def disable() -> None:
    _State.users -= 1
    if _State.users > 0:
        return
    signal.signal(INTERRUPT, _State.previous_handler or signal.SIG_DFL)
    if _on_blocked in events.subscribers:
        events.subscribers.remove(_on_blocked)
    # gevent's thread stays for the process (stopping and starting it per consumer left
    # several alive at once); with no consumer, a blocked hub is only an event.


def arm(subject: Any, timeout: float) -> None:
    """``subject`` (a handler greenlet) runs a job that must end within ``timeout`` s."""
    _DEADLINES[subject] = (time.monotonic() + timeout, timeout)


def hand_over(holder: Any, task: Any) -> bool:
    """While ``task`` (an asyncio task) runs ``holder``'s coroutine, ``holder``'s deadline
    is the task's too; whether ``holder`` had one (then ``disarm(task)`` after)."""
    deadline = _DEADLINES.get(holder)
    if deadline is None:
        return False
    _DEADLINES[task] = deadline
    return True


def disarm(subject: Any) -> None:
    del _DEADLINES[subject]


def _start() -> None:
    _State.previous_handler = signal.signal(INTERRUPT, _interrupt)
    # The OS thread to interrupt: this one (gevent's patched get_ident names greenlets).
    _State.main_thread = monkey.get_original("_thread", "get_ident")()
    events.subscribers.append(_on_blocked)
    hub = gevent.get_hub()
    if hub.periodic_monitoring_thread is None:
        # For this hub only: left on, the setting would start a monitor (with gevent's
        # own costly report) for every hub made later, e.g. in a native thread.
        gevent.config.monitor_thread = True
        try:
            hub.start_periodic_monitoring_thread()
        finally:
            gevent.config.monitor_thread = False
    _use_cheap_report(hub.periodic_monitoring_thread)


def _use_cheap_report(thread: Any) -> None:
    """Have gevent's monitor thread run ``_check`` instead of its own blocking report
    (its first monitoring function; gevent keeps its period at ``max_blocking_time``)."""
    entries = getattr(thread, "_monitoring_functions", None)
    tracer = getattr(thread, "_greenlet_tracer", None)
    if not entries or tracer is None:  # another gevent: keep its report, printed
        return
    gevent.config.print_blocking_reports = False
    _State.tracer = tracer
    entries[0].function = _check


def _check(hub: Any) -> None:
    """In gevent's monitor thread, every ``max_blocking_time``: a greenlet that has held
    the hub since the last look is reported with its stack (one frame walk)."""
    blocked = _State.tracer.did_block_hub(hub)
    if not blocked:
        return
    frame = sys._current_frames().get(hub.thread_ident)
    info = traceback.format_stack(frame) if frame is not None else []
    period = float(gevent.config.max_blocking_time)
    events.notify(events.EventLoopBlocked(blocked[1], period, info, hub=hub))


def _on_blocked(event: object) -> None:
    """In gevent's monitor thread: report, and interrupt a handler past its deadline."""
    if not isinstance(event, events.EventLoopBlocked):
        return
    blocker = _subject(event.greenlet)
    _report(blocker, event.blocking_time, event.info)
    deadline = _DEADLINES.get(blocker)
    if deadline is not None and time.monotonic() >= deadline[0]:
        signal.pthread_kill(_State.main_thread, INTERRUPT)


def _subject(greenlet: Any) -> Any:
    """What ``greenlet`` runs: itself, or the task a loop greenlet runs now."""
    current = CURRENT.get(greenlet)
    found = current() if current is not None else None
    return greenlet if found is None else found


def _report(blocker: Any, period: float, info: list[str]) -> None:
    now = time.monotonic()
    # gevent reports every period while the hub stays blocked: one warning per episode.
    same_episode = blocker is _State.last_blocker and now - _State.last_report < 2.5 * period
    _State.last_blocker, _State.last_report = blocker, now
    if same_episode:
        return
    what = "a handler that does not yield?"
    if isinstance(blocker, asyncio.Future):  # a task: the loop greenlet holds the hub
        what = "a coroutine on the asyncio loop that does not await?"
    log.warning("the gevent hub has been blocked for over %.2f s by %r (%s); its stack:\n%s",
                period, blocker, what, "".join(info))  # fmt: skip


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """In the main thread, in whatever greenlet runs now: raise only in a handler that is
    past its deadline (the signal may arrive after it yielded, or finished)."""
    deadline = _DEADLINES.get(_subject(gevent.getcurrent()))
    if deadline is not None and time.monotonic() >= deadline[0]:
        raise JobTimeout(deadline[1])  # in a task's coroutine, it ends that task
