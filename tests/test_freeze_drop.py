"""After the hub stood still, a consumer drops the buffered jobs others recovered, and
only those: never the jobs of a fetch that landed while it read its in-flight set.

Reading the set yields; the poller's fetch could land meanwhile, and its jobs (owned,
but not in what the read returned) were dropped with the recovered ones. They then
stayed in flight for good: the consumer lived on and heartbeat, so no custodian took
them back (tests/test_faults.py's scenario 14 lost 5 jobs to this about one run in 36).
"""

from __future__ import annotations

import gq
from gq.options import ConsumerOptions
from gq.store.keys import QueueKeys
from gq.worker.liveness import Liveness
from gq.worker.processor import Processor


def _job(job_id: str) -> gq.Job:
    job = gq.Job(job_id, b"")
    job.queue = "q"
    return job


class _Queue:
    """The queue as Liveness sees it: its in-flight set holds ``owned``; the read of it
    runs ``meanwhile`` after it has read (a fetch landing during the round trip)."""

    keys = QueueKeys("q")

    def __init__(self, owned: set[str], meanwhile: object) -> None:
        self.owned, self.meanwhile = owned, meanwhile

    def register(self, consumer_id: str) -> float:
        return 0.0

    def inflight_ids(self, consumer_id: str) -> set[str]:
        seen = set(self.owned)
        self.meanwhile()  # type: ignore[operator]
        return seen


def test_a_fetch_landing_during_the_check_after_a_freeze_is_not_dropped() -> None:
    processor = Processor(
        {"q": _Queue(set(), None)},  # type: ignore[dict-item]
        "c", ConsumerOptions(), lambda job: None, lambda error: None, "test",
    )  # fmt: skip
    processor.put([_job("still-mine"), _job("recovered-by-another")])

    def fetch_lands() -> None:
        queue.owned.add("fetched-meanwhile")
        processor.put([_job("fetched-meanwhile")])

    queue = _Queue({"still-mine"}, fetch_lands)
    liveness = Liveness({"q": queue}, "c", ConsumerOptions(), "test")  # type: ignore[dict-item]
    liveness._after_freeze(4.0, processor.drop_buffered, processor.buffered_jobs)

    assert [job.id for job in processor.buffered_jobs()] == ["still-mine", "fetched-meanwhile"]


def test_jobs_fetched_during_the_check_are_kept_even_where_they_reuse_a_run_jobs_memory() -> None:
    # The jobs buffered before the read are told apart by identity: while the read is on the
    # wire, handlers may take them, run them and let them go, and a job fetched meanwhile
    # then often gets a freed one's address (CPython reuses it at once): id() alone would
    # take the new job for an old one, and drop it.
    processor = Processor(
        {"q": _Queue(set(), None)},  # type: ignore[dict-item]
        "c", ConsumerOptions(), lambda job: None, lambda error: None, "test",
    )  # fmt: skip
    processor.put([_job(f"ran-{i}") for i in range(50)])

    def run_all_then_fetch() -> None:
        while not processor.buffer.empty():
            processor.buffer.get_nowait()  # run elsewhere, then freed
        fetched = [f"fetched-{i}" for i in range(50)]
        queue.owned.update(fetched)
        processor.put([_job(job_id) for job_id in fetched])

    queue = _Queue(set(), run_all_then_fetch)
    liveness = Liveness({"q": queue}, "c", ConsumerOptions(), "test")  # type: ignore[dict-item]
    liveness._after_freeze(4.0, processor.drop_buffered, processor.buffered_jobs)

    assert [job.id for job in processor.buffered_jobs()] == [f"fetched-{i}" for i in range(50)]
