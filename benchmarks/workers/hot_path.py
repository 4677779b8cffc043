"""The job path that metrics touch, in isolation: decode a fetched message, run a noop
handler through Processor.execute, release the acknowledged batch. No Redis: the acker
greenlet is never started, so nothing is written.

usage: hot_path.py MODE (off | on | counters (on without histograms) | task (off, with a
noop task of a gq.App, dispatched through its envelope, against the byte job's noop
handler); run it with an older gq on PYTHONPATH for "before")
Prints the best of 7 rounds as JSON: CPU microseconds per job.
"""

from gevent import monkey

monkey.patch_all()

import inspect  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from gq import job as jobs  # noqa: E402
from gq.options import ConsumerOptions  # noqa: E402

try:  # run on an older gq (before the gq/worker/ and gq/store/ layout) for "before"
    from gq.store.keys import QueueKeys
    from gq.worker.processor import Processor
except ImportError:
    from gq.keys import QueueKeys  # type: ignore[no-redef]
    from gq.processor import Processor  # type: ignore[no-redef]

N = 20_000
BATCH = 100  # jobs per acknowledgement batch


class StubQueue:
    keys = QueueKeys("bench")


_RECORDERS: dict[str, object] = {}


def noop_app() -> object:
    """A gq.App with one noop task, as benchmarks/workers/task_worker.py runs it."""
    import gq

    app = gq.App(queue="bench")

    @app.task(name="noop")
    def noop(n: int) -> None: ...

    return app


def round_(messages: list, mode: str) -> float:
    # gq before issue #10 takes one queue, after it a mapping of name -> queue.
    several = next(iter(inspect.signature(Processor).parameters)) == "queues"
    queues = {"bench": StubQueue()} if several else StubQueue()
    handler = noop_app() if mode == "task" else lambda job: None
    processor = Processor(queues, "c", ConsumerOptions(), handler,
                          lambda error: None, "bench")  # type: ignore[arg-type]
    if mode in ("on", "counters"):
        from gq import metrics

        # One recorder for every round, as a running worker has: above the sampling rate
        # (gq.metrics.SAMPLE_ABOVE jobs/s) only a sample of the jobs is timed.
        if mode not in _RECORDERS:
            _RECORDERS[mode] = metrics.PrometheusRecorder("bench", histograms=mode == "on")
        if hasattr(type(processor), "recorder"):  # gq before the re-cut of issue #15
            processor.recorder = _RECORDERS[mode]
        else:
            processor.recorders["bench"] = _RECORDERS[mode]
    decode, execute, pending = jobs.decode, processor.execute, processor.acker._pending
    # After the re-cut of issue #15 the ledger releases a batch, and the poller offers the
    # jobs to the sampler (its share of the sampling, done here as the poller does).
    ledger = getattr(processor, "_ledger", None)
    release = processor._release if ledger is None else ledger.acked
    sampler = None if ledger is None else ledger.sampler
    if sampler is not None and mode == "on":
        sampler.start()
    t0 = time.process_time()
    for start in range(0, N, BATCH):
        batch_messages = messages[start:start + BATCH]
        decoded = []
        for message in batch_messages:
            job = decode(message)
            job.queue = "bench"
            decoded.append(job)
        if sampler is not None and sampler.every:
            sampler.offer(decoded, batch_messages)
        for job in decoded:
            execute(job)
        batch = pending[:]
        pending.clear()
        release(batch)
    return (time.process_time() - t0) / N * 1e6


def data(mode: str, i: int) -> bytes:
    """A job's Data: a noop task's envelope (as ``noop.enqueue(i)`` writes it), else bytes."""
    if mode != "task":
        return b"x" * 16
    from gq.tasks import envelope

    return envelope.encode("noop", [i], {})


def main() -> None:
    mode = sys.argv[1]
    now = time.time()
    messages = [jobs.encode(jobs.Job(f"id-{i}", data(mode, i)), ready_at=now) for i in range(N)]
    print(json.dumps({"mode": mode, "cpu_us_per_job": min(round_(messages, mode)
                                                          for _ in range(7))}))


if __name__ == "__main__":
    main()
