"""Adaptive prefetch (issue #10, SPEC section 5): the default ``poller_buffer_size="auto"``
against fixed sizes, measured in one run.

1. Noop drain of one gq worker process (C=100): "auto" next to fixed buffers of 10
   (curlyq's default), 100, 500 and 1,000; the figure is auto / the best fixed size
   (target: at least 0.8).
2. Sharing: two ``gq-worker`` processes (C=100 each) and 200 jobs of 100 ms; the larger
   share one of them ran (target: at most 60%), at "auto" and at a fixed 500.
3. Hoarding: one ``gq-worker`` (C=5) and 50 jobs of 1 s; the most jobs it held beyond the
   5 running (target: about C at most), at "auto" and at a fixed 100.
4. Idle pickup latency (p50/p99) at "auto" (target: p99 under 5 ms).

usage: prefetch.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

import redis
from common import (
    ROOT,
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    percentiles,
    write_json,
)
from gqbench import delete_queue, gq_drain
from latency import idle_sender
from latency import run as latency_run

import gq

FIXED = [10, 100, 500, 1000]


def worker(url: str, queue: str, label: str, sleep: float, *flags: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BENCH_URL": url, "BENCH_QUEUE": queue, "BENCH_LABEL": label,
           "BENCH_SLEEP_S": str(sleep), "PYTHONPATH": os.pathsep.join([str(WORKERS), str(ROOT)])}
    return subprocess.Popen([sys.executable, "-m", "gq.cli.worker", "share_handler:sleep_and_tag",
                             "--queue", queue, "--url", url, "--stats-interval", "0", *flags],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


def registered(client: redis.Redis, queue: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while client.zcard(f"{queue}:consumers") < count:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start")
        time.sleep(0.05)


def sharing(url: str, buffer: str) -> float:
    """The larger share of 200 jobs of 100 ms that one of two workers ran."""
    queue = f"bench-share-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    procs = [worker(url, queue, label, 0.1, "--concurrency", "100", "--buffer-size", buffer)
             for label in "ab"]  # fmt: skip
    try:
        registered(client, queue, 2)
        gq.Producer(queue, url=url).perform_many([b""] * 200)
        while client.llen(f"{queue}:bench:ran") < 200:
            time.sleep(0.05)
        ran = [x.decode() for x in client.lrange(f"{queue}:bench:ran", 0, -1)]
        return max(ran.count("a"), ran.count("b")) / 200
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
        delete_queue(url, queue)


def hoarding(url: str, buffer: str) -> int:
    """The most jobs one C=5 worker held beyond its 5 running, over 50 jobs of 1 s."""
    queue = f"bench-hoard-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    proc = worker(url, queue, "a", 1.0, "--concurrency", "5", "--buffer-size", buffer)
    try:
        registered(client, queue, 1)
        [member] = client.zrange(f"{queue}:consumers", 0, -1)
        gq.Producer(queue, url=url).perform_many([b""] * 50)
        most, deadline = 0, time.monotonic() + 4
        while time.monotonic() < deadline:
            most = max(most, client.scard(member) - 5)
            time.sleep(0.02)
        return most
    finally:
        proc.kill()
        proc.wait(10)
        delete_queue(url, queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 jobs per drain")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = 20_000 if args.quick else 60_000
    drains: dict[str, list[float]] = {"auto": [], **{str(size): [] for size in FIXED}}
    with dedicated_redis() as url:
        for _ in range(args.repeat):  # alternating, so that load changes hit all alike
            for size in drains:
                drains[size].append(gq_drain(url, n, 100, size)["rate"])  # type: ignore[arg-type]
        shares = {b: sharing(url, b) for b in ("auto", "500")}
        hoards = {b: hoarding(url, b) for b in ("auto", "100")}
        idle = latency_run(url, 300 if args.quick else 1000, idle_sender, buffer="auto")
        facts = machine(url)
    rates = {size: statistics.median(runs) for size, runs in drains.items()}
    best = max((rates[str(size)], size) for size in FIXED)
    lat = percentiles([x * 1000 for x in idle["latencies"]])
    print(markdown_table(["buffer", "noop jobs/s (median)", "÷ best fixed"],
                         [[size, rate, f"{rate / best[0]:.2f}"] for size, rate in rates.items()]))
    print(markdown_table(["buffer", "larger share of 200 x 100 ms, 2 workers",
                          "held beyond running, 50 x 1 s, C=5"],
                         [[b, f"{shares[b]:.0%}", hoards[h]] for b, h in (("auto", "auto"),
                                                                          ("500", "100"))]))
    print(f"idle pickup at auto: p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms")
    write_json("prefetch", {"command": command(), "machine": facts, "jobs": n,
                            "drains": drains, "rates": rates, "best_fixed": best[1],
                            "auto_vs_best": rates["auto"] / best[0], "shares": shares,
                            "hoards": hoards, "idle_latency_ms": lat})  # fmt: skip


if __name__ == "__main__":
    main()
