"""benchmarks/groups.py's worker: one gq Consumer whose handler notes, for every job, its
id and the wall-clock times it started and ended (waiting BENCH_SLEEP_MS in between),
stopped at the epoch time BENCH_UNTIL, once BENCH_N jobs ran, or at SIGINT; prints
{"spans": [[id, start, end], ...], "fetches": [...], "pid": ...} as its last line.

usage: group_worker.py URL QUEUE CONCURRENCY
"""

import os
import sys

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

import gq  # noqa: E402
from gq.store.jobs import RedisQueue  # noqa: E402

# Every fetch that took jobs: (sent, answered, jobs, whether "small-0" was among them), so
# that groups.py can count the fetches between an enqueue and the job's fetch (its turns).
FETCHES: list[tuple[float, float, int, bool]] = []
_fetch = RedisQueue.fetch


def noted_fetch(self: RedisQueue, *args: object, **kwargs: object) -> object:
    sent = time.time()
    fetched = _fetch(self, *args, **kwargs)  # type: ignore[arg-type]
    if fetched:
        FETCHES.append((sent, time.time(), len(fetched), any(i == "small-0" for i, _ in fetched)))
    return fetched


RedisQueue.fetch = noted_fetch  # type: ignore[assignment,method-assign]


def main() -> None:
    url, queue, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    until = float(os.environ.get("BENCH_UNTIL", "0"))
    limit = int(os.environ.get("BENCH_N", "0"))
    sleep = float(os.environ.get("BENCH_SLEEP_MS", "0")) / 1000
    spans: list[tuple[str, float, float]] = []
    clock = time.time
    consumer = gq.Consumer(queue, url=url, processor_concurrency=concurrency)

    def handler(job: gq.Job) -> None:
        started = clock()
        if sleep:
            gevent.sleep(sleep)
        spans.append((job.id, started, clock()))
        if limit and len(spans) == limit:
            consumer.stop()

    gevent.signal_handler(signal.SIGINT, consumer.stop)  # groups.py's "all done": a clean stop
    if until:
        gevent.spawn_later(max(0.0, until - time.time()), consumer.stop)
    consumer.run(handler)
    print(json.dumps({"spans": spans, "fetches": FETCHES, "pid": os.getpid()}))


if __name__ == "__main__":
    main()
