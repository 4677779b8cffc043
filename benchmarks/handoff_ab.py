"""The asyncio hand-off before and after a change, in one run: async handlers
(``workers/gq_worker.py``, ``BENCH_ASYNC=1``) on gq as of ``--before REV`` and on the
working tree, alternating, medians of --repeat:

- 1,000 x asyncio.sleep(0.1), C=1000, buffer 1000 (rate / the ideal 10,000 jobs/s);
- 100 x asyncio.sleep(0.1), C=100, buffer 1000 (rate / 1,000 jobs/s);
- async noop, C=100, buffer 100.

usage: handoff_ab.py --before REV [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid

from common import WORKERS, command, dedicated_redis, machine, markdown_table, run_json, write_json
from gqbench import PYTHON, delete_queue, prefill
from metrics_cost import old_tree

WORKLOADS = {  # name: (jobs, C, buffer, sleep ms, ideal jobs/s)
    "sleep 100 ms, C=1000": (20_000, 1000, 1000, 100, 10_000),
    "sleep 100 ms, C=100": (3_000, 100, 1000, 100, 1_000),
    "noop, C=100": (50_000, 100, 100, 0, None),
}


def drain(url: str, tree: str | None, n: int, c: int, buffer: int, sleep_ms: float) -> dict:
    queue = f"bench-ab-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    worker = [str(WORKERS / "gq_worker.py"), url, queue, str(c), str(buffer)]
    launcher = [PYTHON] if tree is None else [PYTHON, str(WORKERS / "before.py"), tree]
    env = {"BENCH_N": str(n), "BENCH_SLEEP_MS": str(sleep_ms), "BENCH_ASYNC": "1"}
    try:
        return run_json(launcher + worker, 300, env)
    finally:
        delete_queue(url, queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", metavar="REV", required=True)
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    runs: dict[str, dict[str, list[dict]]] = {w: {"before": [], "after": []} for w in WORKLOADS}
    with dedicated_redis() as url, old_tree(args.before) as tree:
        info = machine(url)
        for rep in range(args.repeat):
            for name, (n, c, buffer, sleep_ms, _) in WORKLOADS.items():
                for side, where in (("before", tree), ("after", None)):
                    runs[name][side].append(drain(url, where, n, c, buffer, sleep_ms))
            print(f"rep {rep} done", file=sys.stderr, flush=True)
    rows = []
    for name, (_, _, _, _, ideal) in WORKLOADS.items():
        rate = {s: statistics.median(r["rate"] for r in runs[name][s]) for s in runs[name]}
        cpu = {s: statistics.median(r["cpu_us_per_job"] for r in runs[name][s]) for s in rate}
        shown = {s: f"{v / ideal:.1%} ({v:,.0f}/s)" if ideal else f"{v:,.0f} jobs/s"
                 for s, v in rate.items()}  # fmt: skip
        rows.append([name, shown["before"], shown["after"], f"{cpu['before']} / {cpu['after']}"])
    write_json("handoff_ab", {"machine": info, "command": command(), "before": args.before,
                              "repeat": args.repeat, "runs": runs})  # fmt: skip
    print(markdown_table(["workload", "before", "after", "CPU µs/job before / after"], rows))


if __name__ == "__main__":
    main()
