"""The handler of benchmarks/retry_lateness.py, run by ``gq-worker lateness_handler:handler``.

Each job's data says what it is: ``retry`` (asks for ``gq.Retry(after=1)`` on its first
run), ``at DUE`` / ``now DUE`` (due at DUE, unix seconds; ``now``: ready at its enqueue)
or ``after`` (its due time is the server's, which the benchmark reads from the scheduled
set). On the run that was due, it pushes "KIND SECONDS-LATE" on the list $BENCH_OUT
("after ID START" for ``after``).
"""

import os
import time

import redis

import gq

RETRY_AFTER = 1.0
_client = redis.Redis.from_url(os.environ["BENCH_URL"])
_out = os.environ["BENCH_OUT"]
_asked: dict[str, float] = {}  # job id -> when it raised gq.Retry


def handler(job: gq.Job) -> None:
    now = time.time()
    kind, _, due = job.data.decode().partition(" ")
    if kind == "retry":
        if job.attempt == 0:
            _asked[job.id] = now
            raise gq.Retry(after=RETRY_AFTER)
        # Due RETRY_AFTER after the retry was written, a little after the raise: the
        # figure is an upper bound by that little (well under a millisecond).
        late = now - (_asked.pop(job.id) + RETRY_AFTER)
    elif kind == "after":
        _client.rpush(_out, f"after {job.id} {now!r}")
        return
    else:
        late = now - float(due)
    _client.rpush(_out, f"{kind} {late!r}")
