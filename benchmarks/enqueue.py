"""Workload 4: enqueue rate, perform one at a time and perform_many (batches of 1,000).

Median of --repeat runs, each into a fresh queue on a dedicated redis-server; also
perform_many with redis-py's pure-Python parser, in a subprocess with hiredis hidden.

usage: enqueue.py [--quick] [--repeat K]
"""

from __future__ import annotations

import sys

if "--child" in sys.argv:  # before redis is imported: hide hiredis from redis-py
    sys.modules["hiredis"] = None  # type: ignore[assignment]

import argparse
import statistics
import subprocess
import sys
import time
import uuid

from common import command, dedicated_redis, machine, markdown_table, versions, write_json
from gqbench import delete_queue


def measure(url: str, mode: str, n: int) -> float:
    import gq

    queue = f"bench-enq-{uuid.uuid4().hex[:8]}"
    producer = gq.Producer(queue, url=url)
    try:
        start = time.perf_counter()
        if mode == "perform":
            for _ in range(n):
                producer.perform(b"x" * 16)
        else:
            for i in range(0, n, 1000):
                producer.perform_many([b"x" * 16] * min(1000, n - i))
        return n / (time.perf_counter() - start)
    finally:
        delete_queue(url, queue)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(measure(sys.argv[2], "perform_many", int(sys.argv[3])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n_one = 3000 if args.quick else 10_000
    n_many = 50_000 if args.quick else 200_000
    results = {}
    with dedicated_redis() as url:
        info = machine(url)
        for mode, n in (("perform", n_one), ("perform_many", n_many)):
            rates = [measure(url, mode, n) for _ in range(args.repeat)]
            results[mode] = {"n": n, "rate": statistics.median(rates), "rates": rates}
        rates = [float(subprocess.run([sys.executable, __file__, "--child", url, str(n_many)],
                                      capture_output=True, text=True, check=True).stdout)
                 for _ in range(args.repeat)]
        results["perform_many_no_hiredis"] = {"n": n_many, "rate": statistics.median(rates),
                                              "rates": rates}
    write_json("enqueue", {"workload": "enqueue", "machine": info, "command": command(),
                           "versions": versions(["gq", "redis", "hiredis", "msgpack"]),
                           "results": results})
    print(markdown_table(["call", "jobs", "jobs/s (median)"],
                         [[k, v["n"], v["rate"]] for k, v in results.items()]))


if __name__ == "__main__":
    main()
