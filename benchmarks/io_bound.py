"""Workload 2: I/O-bound efficiency and memory of one gq worker process.

Handlers sleep X ms (gevent.sleep) at concurrency C; efficiency = (N·X/C) / measured time.
Peak RSS comes from psutil (sampled as concurrency rises) and getrusage. A last run holds
10,000 handlers waiting at once (X = 3 s) to measure RSS per 1,000 running handlers.

usage: io_bound.py [--quick] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from common import command, dedicated_redis, machine, markdown_table, versions, write_json
from gqbench import gq_drain, strip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    seconds = 1.5 if args.quick else 3.0  # the ideal duration of one run
    rows, data = [], []
    with dedicated_redis() as url:
        info = machine(url)
        for x_ms in (10, 100):
            for c in (100, 1000, 10_000):
                ideal_rate = c / (x_ms / 1000)
                n = int(min(max(ideal_rate * seconds, 2 * c), 60_000))
                runs = []
                for _ in range(repeat):
                    r = strip(gq_drain(url, n, c, min(c, 1000), x_ms))
                    r["efficiency"] = (n * x_ms / 1000 / c) / r["elapsed"]
                    runs.append(r)
                med = statistics.median(r["efficiency"] for r in runs)
                best = min(runs, key=lambda r: abs(r["efficiency"] - med))
                data.append({"x_ms": x_ms, "c": c, "n": n, "buffer": min(c, 1000), **best,
                             "efficiencies": sorted(r["efficiency"] for r in runs)})
                rows.append([x_ms, c, n, f"{med:.1%}", best["rate"], ideal_rate,
                             best["rss_peak_mb"], best["max_running"]])
                print(rows[-1], file=sys.stderr, flush=True)
        hold = strip(gq_drain(url, 10_000, 10_000, 1000, 3000))
    hold["rss_per_1000_running_mb"] = (
        (hold["rss_peak_mb"] - hold["rss_base_mb"]) / hold["max_running"] * 1000)
    payload = {"workload": "I/O-bound handlers (gevent.sleep X ms) at concurrency C",
               "machine": info, "command": command(), "repeat": repeat,
               "versions": versions(["gq", "redis", "hiredis", "gevent", "greenlet"]),
               "results": data, "hold_10000": hold}
    write_json("io_bound", payload)
    print(markdown_table(["X ms", "C", "jobs", "efficiency (median)", "jobs/s", "ideal jobs/s",
                          "peak RSS MB", "max running"], rows))
    print(f"\n10,000 handlers waiting at once (X = 3 s): peak RSS {hold['rss_peak_mb']:.0f} MB "
          f"(getrusage {hold['ru_maxrss_mb']:.0f} MB), {hold['max_running']:,} running at peak, "
          f"{hold['rss_per_1000_running_mb']:.1f} MB per 1,000 running handlers above the "
          f"{hold['rss_base_mb']:.0f} MB at start.")


if __name__ == "__main__":
    main()
