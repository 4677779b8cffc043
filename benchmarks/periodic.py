"""Workload: the cost of one periodic proposal (periodic.lua), against one push of one job
(push.lua, the baseline) measured in the same run on the same dedicated redis-server.

Each occurrence costs N script calls for N workers: one "enqueued" and N-1 "done".

usage: periodic.py [--quick] [--repeat K]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import uuid
from collections.abc import Callable

from common import command, dedicated_redis, machine, markdown_table, versions, write_json
from gqbench import delete_queue


def timed(n: int, call: Callable[[int], object]) -> float:
    """Microseconds per call, one call after another (one round trip each)."""
    start = time.perf_counter()
    for i in range(n):
        call(i)
    return (time.perf_counter() - start) / n * 1e6


def one_run(url: str, n: int) -> dict[str, float]:
    import redis

    from gq import job as jobs
    from gq.store.jobs import PeriodicOccurrence, RedisQueue

    queue = f"bench-periodic-{uuid.uuid4().hex[:8]}"
    rq = RedisQueue(redis.Redis.from_url(url), queue)
    now = math.floor(rq.server_time())
    message = jobs.encode(jobs.Job("x", b"x" * 16))

    def propose(i: int) -> object:
        name = f"s{i}"  # n schedules, each due now
        rule = "every\t3600\tUTC"
        return rq.enqueue_periodic(
            PeriodicOccurrence(name, now, now + 3600, f"periodic:{name}:{now}", message, rule, 10)
        )

    try:
        return {
            "push": timed(n, lambda i: rq.push([(f"j{i}", message)])),
            "periodic_enqueued": timed(n, propose),
            "periodic_done": timed(n, propose),  # the same occurrences again: refused
        }
    finally:
        delete_queue(url, queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = 2000 if args.quick else 10_000
    with dedicated_redis() as url:
        info = machine(url)
        runs = [one_run(url, n) for _ in range(args.repeat)]
    results = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    write_json("periodic", {"workload": "periodic", "machine": info, "command": command(),
                            "versions": versions(["gq", "redis", "hiredis"]), "n": n,
                            "results": results, "runs": runs})  # fmt: skip
    base = results["push"]
    print(markdown_table(["call", "µs per call (median)", "vs push"],
                         [[k, round(v, 1), f"{v / base:.2f}x"]
                          for k, v in results.items()]))  # fmt: skip


if __name__ == "__main__":
    main()
