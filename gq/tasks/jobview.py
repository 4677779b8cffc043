"""One job as an operator sees it (``gq job ID``, the dashboard's job page): its status,
task, group and arguments, attempts, times, and result or error, read from
its message while it exists and from its kept result once it finished.

Its times (``JobTimes``, unix seconds, None when unknown): ``enqueued_at`` from its id
(gq.tasks.ids), ``started_at`` (its first run's start: known when the run recorded was
attempt 0), ``last_started_at`` and ``finished_at`` from its kept record."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from gq import job as jobs
from gq.errors import EnvelopeError
from gq.store.base import ScriptedQueue
from gq.store.outcomes import State, read_state, recent, status_of
from gq.store.progress import read_progress
from gq.tasks import envelope
from gq.tasks.ids import id_time


@dataclass(frozen=True)
class JobTimes:
    """When a job was enqueued, first started, last started and finished (unix seconds;
    None when unknown: a start or end is known once the job kept a record)."""

    enqueued_at: float | None
    started_at: float | None
    last_started_at: float | None
    finished_at: float | None


def times_of(state: State, job_id: str) -> JobTimes:
    """A job's times from what Redis says of it (``read_state``)."""
    record = state.record
    if record is None:
        return JobTimes(id_time(job_id), None, None, None)
    first = record.started if record.attempt == 0 else None  # (a retry's first: unknown)
    return JobTimes(id_time(job_id), first, record.started, record.at)


@dataclass(frozen=True)
class JobState:
    """What a status endpoint shows of a job, read in one look: ``status``, ``attempt``
    (counted from 0: the run it is at, or ended in), ``last_error`` (the error of its
    last failed attempt, or the one it ended with), ``group`` (its tenant's line, when
    its message still says) and ``times`` (JobTimes)."""

    status: str
    attempt: int
    last_error: str | None
    group: str | None
    times: JobTimes


def state_of(queue: ScriptedQueue, job_id: str) -> JobState:
    """The JobState of ``job_id`` on ``queue`` (what ``gq job``, the dashboard, the
    Django backend and ``Result`` show)."""
    state = read_state(queue, job_id)
    attempt, error = attempt_of(state)
    group = None if state.message is None else _from_message(state.message).get("group")
    status = status_of(queue, state, job_id)
    return JobState(status, attempt, error, group, times_of(state, job_id))


def attempt_of(state: State) -> tuple[int, str | None]:
    """The attempt a job is at (or ended in) and its last error: its kept record
    decides, else its message (a retry carries the error that sent it back)."""
    if state.record is not None:
        return state.record.attempt, state.record.error
    if state.message is None:
        return 0, None
    try:
        return jobs.decode(state.message).attempt, jobs.decode_error(state.message)
    except jobs.MessageDecodeError:
        return 0, None


def job_view(queue: ScriptedQueue, job_id: str) -> dict[str, Any]:
    """Everything known of ``job_id`` on ``queue``; ``status`` "missing" when nothing."""
    state = read_state(queue, job_id)
    view: dict[str, Any] = {"id": job_id, "queue": queue.keys.name,
                            "status": status_of(queue, state, job_id)}  # fmt: skip
    attempt, error = attempt_of(state)
    view.update(attempt=attempt, error=error)
    if state.message is not None:
        view.update(_from_message(state.message))
    if state.dead or state.scheduled:
        view["since" if state.dead else "due"] = _score(queue, job_id, state.dead)
    if state.record is not None:
        record = state.record.as_dict()
        view.update({k: v for k, v in record.items() if k not in ("at", "started")},
                    finished=record["at"])  # fmt: skip
    view.update(asdict(times_of(state, job_id)))
    view["traceback"] = None if state.record is None else state.record.traceback
    found = progress_of(queue, job_id, view["status"], attempt)
    view["progress"] = None if found is None else {"fraction": found[0], "note": found[1]}
    return view


def progress_of(
    queue: ScriptedQueue, job_id: str, status: str, attempt: int
) -> tuple[float, str] | None:
    """The last ``(fraction, note)`` the run of ``job_id`` at ``attempt`` reported, while
    it runs (``status``); None otherwise: a report outlives its job until it expires."""
    if status != "running":
        return None
    found = read_progress(queue.client, queue.keys.name, job_id)
    if found is None or found[2] != attempt:
        return None
    return found[0], found[1]


def _from_message(message: bytes) -> dict[str, Any]:
    try:
        job = jobs.decode(message)
    except jobs.MessageDecodeError as exc:
        return {"error": f"the message does not decode: {exc}"}
    found: dict[str, Any] = {"ready_at": jobs.decode_ready_at(message)}
    if envelope.is_envelope(job.data):
        try:
            env = envelope.decode(job.data)
        except EnvelopeError as exc:
            found["error"] = f"the envelope does not decode: {exc}"
        else:
            found.update(task=env.task, args=env.args, kwargs=env.kwargs,
                         group=env.opts.get("group"))  # fmt: skip
    else:
        found["data"] = job.data
    return found


def _score(queue: ScriptedQueue, job_id: str, dead: bool) -> float | None:
    client: Any = queue.client
    score = client.zscore(queue.keys.dead if dead else queue.keys.scheduled, job_id)
    return None if score is None else float(score)


def recent_results(queue: ScriptedQueue, count: int = 20) -> list[dict[str, Any]]:
    """The most recent finished jobs that kept a result, newest first."""
    return [{"id": job_id, **record.as_dict()} for job_id, record in recent(queue, count)]


def waiting_status(statuses: Iterable[str]) -> str:
    """A workflow's status while none of its jobs has ended: "ready" (or "scheduled")
    until one has started, then "running". Reads stop at the first job under way."""
    seen: set[str] = set()
    for status in statuses:
        if status not in ("ready", "scheduled"):
            return "running"
        seen.add(status)
    return "ready" if "ready" in seen or not seen else "scheduled"
