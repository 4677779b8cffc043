"""Workloads 1 and 6: noop drain rate against the poller buffer size, next to the ceiling.

A pre-filled queue is drained by one gq worker process (processor_concurrency 100) for each
buffer size, and by the ceiling loop (workers/ceiling_worker.py) fetching batches of the
same size; median of --repeat runs. Also one run at buffer 100 with redis-py's pure-Python
parser (hiredis hidden), to show what the optional extra buys.

usage: throughput.py [--quick] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from common import RESULTS, command, dedicated_redis, machine, markdown_table, versions, write_json
from gqbench import ceiling_drain, gq_drain, strip

SIZES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
CONCURRENCY = 100


def median_run(runs: list[dict]) -> dict:
    med = statistics.median(r["rate"] for r in runs)
    best = min(runs, key=lambda r: abs(r["rate"] - med))
    return {**best, "rate": med, "rates": sorted(r["rate"] for r in runs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    repeat = args.repeat or 3
    base_n = 20_000 if args.quick else 60_000
    rows, data = [], []
    with dedicated_redis() as url:
        info = machine(url)
        for size in SIZES:
            # Small buffers are slow: fewer jobs keep each run to a few seconds.
            n = min(base_n, 2_000 * size)
            gq_runs, ceil_runs = [], []
            for _ in range(repeat):
                gq_runs.append(strip(gq_drain(url, n, CONCURRENCY, size)))
                ceil_runs.append(strip(ceiling_drain(url, n, size)))
            g, c = median_run(gq_runs), median_run(ceil_runs)
            data.append({"buffer": size, "n": n, "gq": g, "ceiling": c})
            rows.append([size, n, g["rate"], g["cpu_us_per_job"], c["rate"], c["cpu_us_per_job"],
                         f"{g['rate'] / c['rate']:.2f}"])
            print(rows[-1], file=sys.stderr, flush=True)
        pure = [strip(gq_drain(url, base_n, CONCURRENCY, 100, hiredis=False))
                for _ in range(repeat)]
    pure_row = median_run(pure)
    at100 = next(d for d in data if d["buffer"] == 100)
    payload = {
        "workload": "noop drain vs poller_buffer_size, concurrency 100",
        "machine": info, "command": command(), "repeat": repeat,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "greenlet", "msgpack"]),
        "results": data,
        "pure_python_parser_at_100": pure_row,
        "hiredis_speedup_at_100": at100["gq"]["rate"] / pure_row["rate"],
    }
    write_json("throughput", payload)
    table = markdown_table(
        ["buffer", "jobs", "gq jobs/s", "gq CPU µs/job", "ceiling jobs/s", "ceiling CPU µs/job",
         "gq ÷ ceiling"], rows)
    table += (f"\n\nWithout hiredis (pure-Python parser), buffer 100: "
              f"{pure_row['rate']:,.0f} jobs/s, {pure_row['cpu_us_per_job']:.1f} µs/job "
              f"(hiredis: {payload['hiredis_speedup_at_100']:.1f}x).")
    print(table)
    plot(data)


def plot(data: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [d["buffer"] for d in data]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(sizes, [d["gq"]["rate"] for d in data], "o-", label="gq (one worker process)")
    ax.plot(sizes, [d["ceiling"]["rate"] for d in data], "s--", label="ceiling loop")
    ax.set_xscale("log")
    ax.set_xlabel("poller_buffer_size (ceiling: fetch batch)")
    ax.set_ylabel("noop jobs/s")
    ax.set_title("Noop drain vs buffer size (concurrency 100)")
    ax.grid(True, which="both", alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(sizes, [d["gq"]["cpu_us_per_job"] for d in data], "^:", color="gray",
             label="gq worker CPU µs/job")
    ax2.set_ylabel("worker CPU µs per job")
    ax2.set_yscale("log")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], loc="center right")
    fig.tight_layout()
    fig.savefig(RESULTS / "throughput.png", dpi=110)


if __name__ == "__main__":
    main()
