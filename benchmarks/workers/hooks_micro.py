"""The dispatcher's cost per job, in-process, no Redis: ``plan(job).run()`` of a noop
task, best of 5 rounds of N, in CPU time (a loaded machine preempts; benchmarks/hooks.py runs
it for each variant).

usage: hooks_micro.py none|after|around   (BENCH_N: jobs a round, default 200000)
"""

import json
import os
import sys
import time

import gevent  # noqa: F401 - as in a worker: both variants import it (gq.tasks.hooks does)

import gq
from gq.job import Job
from gq.tasks import envelope

app = gq.App(url="redis://127.0.0.1:1/0", queue="micro")  # never reached


@app.task(name="noop")
def noop(n: int) -> None: ...


def main() -> None:
    kind = sys.argv[1]
    if kind == "after":
        app.after_job(lambda attempt: None)
    elif kind == "around":
        from contextlib import nullcontext

        app.before_job(lambda attempt: nullcontext())
    job = Job("id-1", envelope.encode("noop", [1], {}))
    job.queue = "micro"
    plan = app.dispatcher().plan
    n = int(os.environ.get("BENCH_N", "200000"))
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            plan(job).run()
        best = min(best, (time.process_time() - start) / n)
    print(json.dumps({"us_per_job": best * 1e6}))


if __name__ == "__main__":
    main()
