"""Instructions per noop job: the worker's cost as a count, for the targets that the
drain's wall clock cannot show on this machine (the same code's rate swings ±20% from one
run to the next; issue 19 asks for "within 3%").

One gq worker process (``workers/gq_worker.py``: byte jobs, C=100, flow.py's worker)
runs under ``valgrind --tool=callgrind`` on a pre-filled queue of N jobs and, separately,
of 2N jobs; (I(2N) - I(N)) / N is the instructions it executes per job, start-up and
shutdown subtracted out. PYTHONHASHSEED is fixed so that dict and set layouts are the
same in every run. Redis's side, on a dedicated redis-server: the scripts' usec (INFO
commandstats, evalsha + eval) and calls in the same drains, (2N - N) / N as well.

Modes (--modes, default bytes,task,results): ``bytes`` (above); ``task``
(``workers/task_worker.py``: a noop ``@app.task``; issue 20's target is a task at
>= 0.85x a byte job); ``results`` (``workers/results_worker.py``, the noop task with a
result_ttl; issue 22's target is results on >= 0.85x off); ``groups`` (byte jobs spread
round robin over 1,000 groups, as groups.py's drain; issue 36's target is >= 0.8x
ungrouped). Each is shown against the byte job of the same tree (and results against the
task), as instructions and as the rate that a worker bound by its own CPU would reach
(the inverse). With --before REV (default 2864a1e, the commit before the worker re-cut;
"" to skip) gq as of REV (``git archive``, run through ``workers/before.py``) is counted
too, for every mode but results (results are not kept there).

Buffer: 1000 by default (--buffer), what "auto" reaches in a native drain (100 ms at
tens of thousands of jobs/s, capped at poller_buffer_max). Under valgrind the worker runs
~50x slower while Redis does not, so "auto" itself would size its fetches from the slowed
rate, and that rate follows the machine's load: with --buffer auto the fetches per job,
and the count, move with the load (spread 0.4-7.6% over two rounds; 1.2-2.7% with 1000).

usage: instructions.py [--n N] [--repeat K] [--before REV] [--modes bytes,task,results,groups]
                       [--buffer B] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import redis
from common import WORKERS, command, dedicated_redis, machine, markdown_table, write_json
from flow import forget, script_usec
from gqbench import PYTHON, prefill
from groups import prefill_groups
from metrics_cost import old_tree

sys.path.insert(0, str(WORKERS))
from results_app import build  # noqa: E402

CONCURRENCY = 100
RESULT_TTL = 3600.0
WORKERS_OF = {  # mode: (script, its arguments after URL QUEUE, before the buffer)
    "bytes": ("gq_worker.py", [str(CONCURRENCY)]),
    "task": ("task_worker.py", [str(CONCURRENCY)]),
    "results": ("results_worker.py", [str(CONCURRENCY), str(RESULT_TTL)]),
    "groups": ("gq_worker.py", [str(CONCURRENCY)]),
}
GROUPS = 1000
COLLECTED = re.compile(r"Collected : (\d+)")


def fill(url: str, queue: str, mode: str, n: int) -> None:
    """``n`` jobs of ``mode`` on ``queue``: bytes, or the noop task (its result kept for
    RESULT_TTL in the results mode), as tasks.py and results.py enqueue them."""
    if mode == "bytes":
        prefill(url, queue, n)
        return
    if mode == "groups":
        prefill_groups(url, queue, n, GROUPS)
        return
    app = build(queue, RESULT_TTL if mode == "results" else 0)
    app.connect(url)
    for start in range(0, n, 10_000):
        app.tasks["noop"].enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])


def script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def callgrind(worker: list[str], n: int, out_file: str) -> int:
    """Run ``worker`` under callgrind until it has run ``n`` jobs; its instruction count."""
    res = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", *worker],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "BENCH_N": str(n), "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    if res.returncode != 0:
        raise RuntimeError(f"{worker[:3]} failed ({res.returncode}): {res.stderr[-2000:]}")
    return int(COLLECTED.findall(res.stderr)[-1])


def count(url: str, tree: str | None, mode: str, n: int, buffer: str,
          out_file: str) -> dict[str, float]:  # fmt: skip
    """One drain of ``n`` jobs under callgrind: the worker's instructions, Redis's script
    usec and calls."""
    queue = f"bench-instr-{uuid.uuid4().hex[:8]}"
    fill(url, queue, mode, n)
    script, args = WORKERS_OF[mode]
    launcher = [PYTHON] if tree is None else [PYTHON, str(WORKERS / "before.py"), tree]
    client = redis.Redis.from_url(url)
    usec, calls = script_usec(client), script_calls(client)
    try:
        worker = [*launcher, str(WORKERS / script), url, queue, *args, buffer]
        instructions = callgrind(worker, n, out_file)
        return {"instructions": instructions, "script_usec": script_usec(client) - usec,
                "script_calls": script_calls(client) - calls}  # fmt: skip
    finally:
        forget(url, queue)


def per_job(url: str, tree: str | None, mode: str, args: argparse.Namespace,
            label: str) -> dict[str, float]:  # fmt: skip
    """(2N drain - N drain) / N of each count: what one more job costs."""
    n, drains = args.n, {}
    for jobs in (n, 2 * n):
        out = str(args.keep / f"callgrind.{label}.{jobs}") if args.keep else "/dev/null"
        drains[jobs] = count(url, tree, mode, jobs, args.buffer, out)
    figures = {k: (drains[2 * n][k] - drains[n][k]) / n for k in drains[n]}
    print(label, {k: round(v, 2) for k, v in figures.items()}, file=sys.stderr, flush=True)
    return {**figures, "startup_instructions": 2 * drains[n]["instructions"]
            - drains[2 * n]["instructions"]}  # fmt: skip


def sides(before: str | None, rev: str) -> dict[str, str | None]:
    return {"now": None, **({f"before ({rev})": before} if before else {})}


def measure(url: str, args: argparse.Namespace, before: str | None) -> dict[str, Any]:
    """--repeat rounds of every side and mode; results only on the working tree."""
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    for rnd in range(args.repeat):
        for label, tree in sides(before, args.before).items():
            for mode in args.modes:
                if mode == "results" and tree is not None:
                    continue
                name = f"{label.split()[0]}.{mode}.{rnd}"
                figures = per_job(url, tree, mode, args, name)
                runs.setdefault(label, {}).setdefault(mode, []).append(figures)
    return runs


def medians(runs: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, dict[str, Any]]:
    return {
        label: {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                for mode, rs in by_mode.items()}
        for label, by_mode in runs.items()
    }  # fmt: skip


def spread(values: list[float]) -> float:
    """(max - min) / median, the stability of a count over the repeats."""
    return (max(values) - min(values)) / statistics.median(values)


def rows(runs: dict[str, Any], med: dict[str, Any]) -> list[list[Any]]:
    now = med.get("now", {})
    out = []
    for label, by_mode in med.items():
        for mode, m in by_mode.items():
            base = by_mode.get("bytes", {}).get("instructions")
            counts = [r["instructions"] for r in runs[label][mode]]
            usec = min(r["script_usec"] for r in runs[label][mode])  # the least disturbed
            out.append([label, mode, m["instructions"], ", ".join(f"{c:,.0f}" for c in counts),
                        f"{spread(counts):.2%}", ratio(m["instructions"], base),
                        ratio(m["instructions"], now.get(mode, {}).get("instructions")),
                        f"{usec:.2f}", f"{m['script_calls']:.4f}"])  # fmt: skip
    return out


def ratio(top: float, bottom: float | None) -> str:
    return f"{top / bottom:.3f} (rate {bottom / top:.3f})" if bottom else ""


def report(runs: dict[str, Any], med: dict[str, Any], n: int) -> None:
    print(markdown_table(
        ["tree", "mode", "instructions/job (median)", "runs", "spread", "÷ bytes, same tree",
         "÷ now, same mode", "Redis script µs/job (best)", "script calls/job"],
        rows(runs, med)))  # fmt: skip
    results = med.get("now", {})
    if "results" in results and "task" in results:
        on, off = results["results"]["instructions"], results["task"]["instructions"]
        print(f"\nresults on ÷ off (the task without result_ttl): {ratio(on, off)}")
    print(f"\nper job = (I(2N) - I(N)) / N with N = {n:,}; rate = the inverse, for a worker "
          "bound by its own CPU")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="N (default 10,000; 2N also runs)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds, for the stability check")
    ap.add_argument("--before", default="2864a1e", metavar="REV",
                    help='also count gq as of REV (default 2864a1e); "" to skip')
    ap.add_argument("--modes", default="bytes,task,results", type=lambda s: s.split(","))
    ap.add_argument("--buffer", default="1000",
                    help='poller_buffer_size (default 1000, what "auto" reaches natively)')
    ap.add_argument("--keep", type=Path, help="keep the callgrind files here (annotate)")
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with dedicated_redis() as url, old_tree(args.before or None) as before:
        info = machine(url)
        runs = measure(url, args, before)
    med = medians(runs)
    write_json("instructions", {
        "workload": "noop drain under callgrind, (I(2N) - I(N)) / N per job",
        "machine": info, "command": command(), "n": args.n, "repeat": args.repeat,
        "before": args.before, "concurrency": CONCURRENCY, "buffer": args.buffer,
        "runs": runs, "medians": med,
    })  # fmt: skip
    report(runs, med, args.n)


if __name__ == "__main__":
    main()
