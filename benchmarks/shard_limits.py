"""Queue-wide limits over a sharded queue under uneven load (issue 35): how close to its
figure, against the same limit on one plain queue measured in the same run.

Starts a local Redis Cluster of 3 masters (benchmarks/sharded.py's) and, for a plain
queue and for a queue of 3 shards with every job routed to shard 0 but a few:

1. **Rate**: a limit of R jobs/s, a backlog of R x SECONDS noop jobs, two consumers
   (gq.Consumer, in this process under gevent). Reported: the jobs/s over the run (first
   start to last), the most starts in any 1 s window, and each against the plain
   queue's. The stated bound is R + R/10 + N per second.
2. **Concurrency**: a limit of C, handlers that wait 50 ms, two consumers able to run 20
   each. Reported: the peak of handlers running at once (never above C) and the jobs/s,
   against the plain queue's (C / 50 ms is the ceiling).

usage: shard_limits.py [--rate R] [--concurrency C] [--seconds S]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from common import command, machine, markdown_table, wait_for, write_json  # noqa: E402
from redis.cluster import ClusterNode, RedisCluster  # noqa: E402
from sharded import start_cluster, stop  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import gq  # noqa: E402
from gq.store.shards import layout  # noqa: E402

FAST = {"heartbeat_poll_interval": 1.0, "poller_poll_duration": 1.0}
SHARDS = 3


def jobs_for(name: str, shards: int | None, count: int) -> list[gq.Job]:
    """``count`` noop jobs, all on shard 0 of a sharded queue but one in 20 (uneven)."""
    if shards is None:
        return [gq.Job(id=f"j-{i}", data=b"") for i in range(count)]
    plan = layout(name, shards)
    ids = (f"j-{i}" for i in range(10**7))
    picked = []
    for i in range(count):
        wanted = plan.queues[0] if i % 20 else plan.queues[1 + i % 2]
        picked.append(next(j for j in ids if plan.for_id(j) == wanted))
    return [gq.Job(id=j, data=b"") for j in picked]


def measure(client: RedisCluster, shards: int | None, limits: dict[str, Any], count: int,
            handler_wait: float) -> dict[str, Any]:  # fmt: skip
    name = f"bl-{uuid.uuid4().hex[:6]}"
    queue_name = name if shards else "{" + name + "}"
    queue = gq.Queue(queue_name, client=client, **({"shards": shards} if shards else {}))
    gq.Producer(queue_name, client=client, **({"shards": shards} if shards else {}))
    queue.set_limits(**limits)
    starts: list[float] = []
    running = [0, 0]  # now, peak

    def handle(job: gq.Job) -> None:
        starts.append(time.monotonic())
        running[0] += 1
        running[1] = max(running)
        gevent.sleep(handler_wait)
        running[0] -= 1

    shard_arg = {"shards": {queue_name: shards}} if shards else {}
    consumers = [gq.Consumer(queue_name, client=client, **shard_arg, **FAST) for _ in range(2)]
    greenlets = [gevent.spawn(c.run, handle) for c in consumers]
    gq.Producer(queue_name, client=client, **({"shards": shards} if shards else {})) \
        .perform_many(jobs_for(name, shards, count))  # fmt: skip
    wait_for(lambda: len(starts) >= count, 300, "every job started")
    for consumer in consumers:
        consumer.stop()
    gevent.joinall(greenlets, timeout=30)
    span = starts[-1] - starts[0]
    return {"queue": "plain" if shards is None else f"{shards} shards", "jobs": count,
            "rate": round((count - 1) / span, 1), "max_1s": max_window(starts, 1.0),
            "peak": running[1]}  # fmt: skip


def max_window(starts: list[float], width: float) -> int:
    """The most starts within any window of ``width`` seconds."""
    best, first = 0, 0
    for last, at in enumerate(starts):
        while at - starts[first] > width:
            first += 1
        best = max(best, last - first + 1)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gq-shard-limits-"))
    procs, ports = start_cluster(root)
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports])
    try:
        rate = {"rate": (args.rate, 1.0)}
        rates = [measure(client, s, rate, args.rate * args.seconds, 0.0) for s in (None, SHARDS)]
        conc = {"concurrency": args.concurrency}
        count = int(args.concurrency / 0.05 * args.seconds)
        concs = [measure(client, s, conc, count, 0.05) for s in (None, SHARDS)]
    finally:
        client.close()
        stop(procs)
        shutil.rmtree(root, ignore_errors=True)
    report(args, rates, concs)


def report(args: argparse.Namespace, rates: list[dict[str, Any]],
           concs: list[dict[str, Any]]) -> None:  # fmt: skip
    bound = args.rate + -(-args.rate // 10) + SHARDS
    print(f"\nRate limit {args.rate}/s, 19 jobs in 20 on one shard (bound {bound} per 1 s)\n")
    print(markdown_table(["queue", "jobs/s", "vs plain", "most in 1 s", "vs plain"],
                         [[r["queue"], r["rate"], round(r["rate"] / rates[0]["rate"], 3),
                           r["max_1s"], round(r["max_1s"] / rates[0]["max_1s"], 3)]
                          for r in rates]))  # fmt: skip
    print(f"\nConcurrency limit {args.concurrency}, 50 ms handlers, same spread\n")
    print(markdown_table(["queue", "peak at once", "jobs/s", "vs plain"],
                         [[c["queue"], c["peak"], c["rate"],
                           round(c["rate"] / concs[0]["rate"], 3)] for c in concs]))  # fmt: skip
    write_json("shard_limits", {"machine": machine(), "command": command(),
                                "rate": rates, "concurrency": concs})  # fmt: skip


if __name__ == "__main__":
    main()
