"""The processor's runs of a dispatcher's jobs (``gq.App``): the ``Plan`` of each job
says what to run, and its timeout, attempts and backoff. A mixin of
``gq.worker.processor.Processor``, whose state it shares; a byte handler's jobs never
come here (their fast path allocates no Plan)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

import gevent

from gq.errors import Kill
from gq.job import Job
from gq.worker import asyncio_loop
from gq.worker.call import Plan
from gq.worker.handler_checks import GreenletExitRaised

log = logging.getLogger("gq.processor")

if TYPE_CHECKING:
    from gq.options import ConsumerOptions
    from gq.worker.acker import Acker
    from gq.worker.recorder import Recorder
    from gq.worker.sampling import Sample


def planner_of(handler: object) -> Callable[[Job], Plan] | None:
    """The ``plan`` of a dispatcher (an object with ``plan(job) -> Plan``), else None:
    a byte handler takes the fast path."""
    planner: Callable[[Job], Plan] | None = getattr(handler, "plan", None)
    return planner


def _run(plan: Plan, job: Job) -> object:
    """``plan.run()``, awaited on the asyncio loop when it returns an awaitable (an
    ``async def`` task's): never acknowledged before it has run (SPEC section 15)."""
    result = plan.call(*plan.args)
    return None if result is None else asyncio_loop.awaited(result, job)


class PlannedRuns:
    """``_execute_planned``, with the Processor's attributes it reads."""

    _opts: ConsumerOptions
    recorders: Mapping[str, Recorder]
    _picked: dict[int, Sample]
    acker: Acker

    _abandoned: bool

    def _run_with_timeout(self, timeout: float, call: Callable[..., object], *args: Any) -> object:
        raise NotImplementedError  # the Processor's

    def _finished_badly(
        self,
        job: Job,
        slot: Any,
        began: float,
        sample: Sample | None,
        exc: BaseException,
        plan: Plan | None = None,
    ) -> None:
        raise NotImplementedError  # the Processor's

    def _execute_planned(self, job: Job, planner: Callable[[Job], Plan], slot: Any) -> None:
        """``execute`` for a dispatcher's job: the Plan says what to run, and its
        timeout, attempts and backoff (None: the consumer's)."""
        sample = self._picked.pop(id(job), None) if self._picked else None
        began = self.recorders[job.queue].started(sample) if sample is not None else 0.0
        slot.job = job
        plan = None
        try:
            plan = planner(job)  # (a raw handler's plan runs on a copy of the job)
            timeout = self._opts.job_timeout if plan.timeout is None else plan.timeout
            if timeout:
                value = self._run_with_timeout(timeout, _run, plan, job)
            else:  # _run, inline: a call fewer for every job without a timeout (the default)
                value = plan.call(*plan.args)
                value = None if value is None else asyncio_loop.awaited(value, job)
        except gevent.GreenletExit:
            if self._abandoned:
                raise  # a forced stop: the job stays in flight for another consumer
            # A task (or a library it called) raised it: a failed attempt, as for a handler.
            self._finished_badly(job, slot, began, sample, GreenletExitRaised(), plan)
        except BaseException as exc:  # noqa: BLE001 - the task's failure, whatever it raised
            self._finished_badly(job, slot, began, sample, exc, plan)
        else:
            unbuilt = None if plan.finish is None else self._build_outcome(job, plan.finish, value)
            if unbuilt is not None:
                # Its options were checked before it ran (gq.tasks.wire_opts), so a bug:
                # the job goes to dead with the reason rather than stop the worker.
                self._finished_badly(job, slot, began, sample, Kill(unbuilt), None)
                return
            slot.job = None
            if sample is not None:
                self.recorders[job.queue].finished(sample, began)
            self.acker.add(job)

    @staticmethod
    def _build_outcome(job: Job, finish: Any, value: object) -> str | None:
        """Its result and follow-ups, which go with its ack, on ``job.outcome`` (``finish``:
        a gq.tasks.outcome.Finisher); None, else why they could not be built."""
        try:
            job.outcome = finish.done(value)
        except Exception as exc:  # noqa: BLE001 - whatever the outcome's build raised
            log.exception("job %s: its outcome could not be built", job.id)
            return f"its outcome could not be built: {type(exc).__name__}: {exc}"
        return None
