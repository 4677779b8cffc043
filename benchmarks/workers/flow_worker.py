"""benchmarks/flow.py's rate-limit worker: one gq Consumer with noop handlers that notes
the wall-clock time of every handler start, stopped at the epoch time BENCH_UNTIL; prints
{"starts": [...], "pid": ...} as its last line.

usage: flow_worker.py URL QUEUE CONCURRENCY
"""

import os
import sys

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

import gq  # noqa: E402
from gq.store.jobs import RedisQueue  # noqa: E402

FETCHES: list[tuple[float, float, int]] = []
_fetch = RedisQueue.fetch


def timed_fetch(self: RedisQueue, *args: object, **kwargs: object) -> object:
    """RedisQueue.fetch, noting when it was sent and answered (the rate limit decides on
    the Redis clock, between the two), which a handler's start time can only approximate."""
    sent = time.time()
    fetched = _fetch(self, *args, **kwargs)  # type: ignore[arg-type]
    if fetched:
        FETCHES.append((sent, time.time(), len(fetched)))
    return fetched


RedisQueue.fetch = timed_fetch  # type: ignore[assignment,method-assign]


def main() -> None:
    url, queue, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    until = float(os.environ["BENCH_UNTIL"])
    starts: list[float] = []
    note = starts.append
    clock = time.time

    def handler(job: gq.Job) -> None:
        note(clock())

    consumer = gq.Consumer(queue, url=url, processor_concurrency=concurrency)
    gevent.spawn_later(max(0.0, until - time.time()), consumer.stop)
    consumer.run(handler)
    print(json.dumps({"starts": starts, "fetches": FETCHES, "pid": os.getpid()}))


if __name__ == "__main__":
    main()
