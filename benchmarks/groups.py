"""Groups (issue 23, SPEC section 17): what grouping costs, and how closely the limits
per group and the fair turns hold. Runs on the real Redis (127.0.0.1:6379 unless --url),
each run on a queue of its own whose keys are deleted afterwards.

1. Drain of noop jobs by one gq worker process (``workers/gq_worker.py``, C=100, buffer
   auto): ungrouped, in 1,000 groups and in 10,000 groups (jobs spread round robin), no
   limit binding. Figures: grouped / ungrouped (target >= 0.8 at 1,000 groups), medians
   of --repeat runs, modes rotated run by run.
2. A group concurrency limit of 5 over three worker processes (``workers/group_worker.py``,
   C=50 each), 20 groups of 100 jobs of 20 ms: the most jobs of one group running at once,
   over every worker (from the handlers' start and end times), against the limit.
3. A group rate limit of 100 per 1 s held over 10 s: one group kept full, two worker
   processes. Figures: starts / 10 s against the limit (target within 5%).
4. Fair turns: a small group's one job enqueued while a big group has 100,000 jobs
   waiting (one worker draining it), against the same job on an idle queue: its wait
   (enqueue to start), and the big group's jobs that started in between (what the
   consumer held already: at most one turn, not 100,000).

usage: groups.py [--quick] [--repeat K] [--url URL] [--parts 1234]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import redis
from common import WORKERS, command, machine, markdown_table, run_json, versions, write_json
from gqbench import PYTHON, delete_queue, prefill, strip

import gq
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue

CONCURRENCY = 100


def forget(url: str, queue: str) -> None:
    delete_queue(url, queue)
    redis.Redis.from_url(url).srem("gq:queues", queue)


def prefill_groups(url: str, queue: str, n: int, groups: int, prefix: str = "g") -> None:
    """``n`` jobs spread round robin over ``groups`` groups (not timed)."""
    store = RedisQueue(redis.Redis.from_url(url), queue)
    step = 1000
    for start in range(0, n, step):
        entries = [(f"{prefix}{i % groups}-{i}", gq.job.encode(gq.Job(f"{prefix}{i % groups}-{i}",
                    b"x" * 16)), 0.0, f"{prefix}{i % groups}")
                   for i in range(start, min(n, start + step))]  # fmt: skip
        push_group(store, "now", entries)


def drain(url: str, n: int, groups: int) -> dict[str, Any]:
    queue = f"bench-groups-{uuid.uuid4().hex[:8]}"
    if groups:
        prefill_groups(url, queue, n, groups)
    else:
        prefill(url, queue, n)
    try:
        return strip(run_json([PYTHON, str(WORKERS / "gq_worker.py"), url, queue,
                               str(CONCURRENCY), "auto"], 600, {"BENCH_N": str(n)}))  # fmt: skip
    finally:
        forget(url, queue)


def drains(url: str, n: int, repeat: int) -> dict[str, Any]:
    modes = {"ungrouped": 0, "groups_1000": 1000, "groups_10000": 10_000}
    names = list(modes)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeat):
        for name in names[i % len(names):] + names[: i % len(names)]:
            rate = drain(url, n, modes[name])["rate"]
            runs[name].append(rate)
            print(f"drain {name}: {rate:,.0f} jobs/s", file=sys.stderr, flush=True)
    med = {name: statistics.median(rates) for name, rates in runs.items()}
    return {"runs": runs, "medians": med,
            "ratio_1000": med["groups_1000"] / med["ungrouped"],
            "ratio_10000": med["groups_10000"] / med["ungrouped"]}  # fmt: skip


def workers(url: str, queue: str, count: int, concurrency: int, env: dict[str, str],
            timeout: float) -> list[dict[str, Any]]:  # fmt: skip
    """Run ``count`` group_worker.py processes to their end; their JSON lines."""
    procs = [subprocess.Popen([PYTHON, str(WORKERS / "group_worker.py"), url, queue,
                               str(concurrency)], env={**os.environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]  # fmt: skip
    try:
        outs = [proc.communicate(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    for proc, (_, err) in zip(procs, outs):
        if proc.returncode != 0:
            raise RuntimeError(f"group_worker failed ({proc.returncode}): {err[-2000:]}")
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def concurrency_held(url: str, limit: int = 5, groups: int = 20,
                     per_group: int = 100) -> dict[str, Any]:  # fmt: skip
    queue = f"bench-groups-c-{uuid.uuid4().hex[:8]}"
    try:
        gq.Queue(queue, url=url).set_group_limits(concurrency=limit)
        prefill_groups(url, queue, groups * per_group, groups)
        # Each worker stops after its share or at the deadline; the deadline is the backstop.
        env = {"BENCH_SLEEP_MS": "20", "BENCH_UNTIL": str(time.time() + 120)}
        results = workers_until_done(url, queue, 3, 50, env, groups * per_group)
    finally:
        forget(url, queue)
    spans: dict[str, list[tuple[float, float]]] = {}
    for result in results:
        for job_id, start, end in result["spans"]:
            spans.setdefault(job_id.rsplit("-", 1)[0], []).append((start, end))
    peaks = {group: most_at_once(s) for group, s in spans.items()}
    return {"limit": limit, "groups": groups, "jobs": sum(len(s) for s in spans.values()),
            "max_running_in_a_group": max(peaks.values()), "min_peak": min(peaks.values()),
            "per_worker": [len(r["spans"]) for r in results]}  # fmt: skip


def workers_until_done(url: str, queue: str, count: int, concurrency: int, env: dict[str, str],
                       total: int) -> list[dict[str, Any]]:  # fmt: skip
    """Workers that stop once the queue's ``total`` jobs are all done (a watcher sets
    BENCH_UNTIL to now when the data hash is empty)."""
    client = redis.Redis.from_url(url)
    procs = [subprocess.Popen([PYTHON, str(WORKERS / "group_worker.py"), url, queue,
                               str(concurrency)], env={**os.environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while client.hlen(f"{queue}:data") > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        for proc in procs:
            proc.send_signal(2)  # SIGINT: a clean stop, then the JSON line
        outs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


def rate_held(url: str, rate: int = 100, seconds: float = 10.0) -> dict[str, Any]:
    queue = f"bench-groups-r-{uuid.uuid4().hex[:8]}"
    startup = 4.0
    try:
        gq.Queue(queue, url=url).set_group_limits(rate=(rate, 1.0))
        prefill_groups(url, queue, int(rate * (seconds + startup + 2) * 1.3), 1)
        env = {"BENCH_UNTIL": str(time.time() + startup + seconds)}
        results = workers(url, queue, 2, CONCURRENCY, env, startup + seconds + 60)
    finally:
        forget(url, queue)
    starts = sorted(start for r in results for _, start, _ in r["spans"])
    t0 = starts[0]
    inside = starts[: bisect.bisect_left(starts, t0 + seconds)]
    most = max(bisect.bisect_left(inside, t + 1.0, lo=i) - i for i, t in enumerate(inside))
    return {"rate": rate, "seconds": seconds, "started": len(inside),
            "achieved": len(inside) / seconds, "achieved_over_limit": len(inside) / seconds / rate,
            "max_in_1s": most, "bound": rate + max(1, -(-rate // 10))}  # fmt: skip


def small_wait(url: str, big: int) -> dict[str, Any]:
    """One worker; with ``big`` jobs of group "big" waiting (it drains them), enqueue one
    job of group "small" and measure its wait and the big jobs started in between."""
    queue = f"bench-groups-f-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    waiting = f"{queue}:groups:waiting"
    try:
        if big:
            prefill_groups(url, queue, big, 1, prefix="big")
        env = {**os.environ, "BENCH_UNTIL": str(time.time() + 600)}
        proc = subprocess.Popen([PYTHON, str(WORKERS / "group_worker.py"), url, queue,
                                 str(CONCURRENCY)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while client.zcard(f"{queue}:consumers") < 1 or (
            big and float(client.zscore(waiting, "big0") or 0) > big * 0.9
        ):  # the worker runs, and (with the big group) is well into its drain
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not start")
            time.sleep(0.005)
        enqueued = time.time()
        push_group(RedisQueue(client, queue), "now",
                   [("small-0", gq.job.encode(gq.Job("small-0", b"")), 0.0, "small")])
        while client.hexists(f"{queue}:data", "small-0") and time.monotonic() < deadline + 60:
            time.sleep(0.005)
        proc.send_signal(2)
        out, err = proc.communicate(timeout=120)
    finally:
        forget(url, queue)
    result = json.loads(out.strip().splitlines()[-1])
    spans = result["spans"]
    # Fetches sent after the enqueue, up to and including the one that took the job: 1
    # when the job was in the first batch fetched after it was enqueued (a fetch already
    # on the wire at the enqueue is not counted: it could not have seen the job).
    fetches = result["fetches"]
    (taken_sent,) = [sent for sent, _, _, small in fetches if small]
    turns = sum(1 for sent, _, _, _ in fetches if enqueued <= sent <= taken_sent)
    (small_start,) = [start for job_id, start, _ in spans if job_id == "small-0"]
    between = sum(1 for job_id, start, _ in spans
                  if job_id != "small-0" and enqueued <= start < small_start)  # fmt: skip
    return {"big_waiting": big, "wait_ms": (small_start - enqueued) * 1000,
            "big_started_between": between, "fetches_until_taken": turns}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000-job drains, 3 repeats")
    ap.add_argument("--repeat", type=int, default=None, help="drains per mode (5; --quick 3)")
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--parts", default="1234", help="which parts to run (default 1234)")
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)
    n = 20_000 if args.quick else 50_000
    info = machine(args.url)
    part1 = drains(args.url, n, repeat) if "1" in args.parts else None
    part2 = concurrency_held(args.url) if "2" in args.parts else None
    part3 = rate_held(args.url) if "3" in args.parts else None
    part4 = ({"without_big": small_wait(args.url, 0), "with_big": small_wait(args.url, 100_000)}
             if "4" in args.parts else None)  # fmt: skip
    payload = {"command": command(), "machine": info, "repeat": repeat, "jobs": n,
               "versions": versions(["redis", "hiredis", "gevent", "msgpack"]),
               "drain": part1, "concurrency": part2, "rate": part3,
               "fair_turns": part4}  # fmt: skip
    write_json("groups", payload)
    report(payload)


def report(p: dict[str, Any]) -> None:
    if p["drain"]:
        med = p["drain"]["medians"]
        rows = [[name, f"{rate:,.0f}", f"{rate / med['ungrouped']:.2f}"]
                for name, rate in med.items()]  # fmt: skip
        print(markdown_table(["mode", "jobs/s (median)", "vs ungrouped"], rows))
    if p["concurrency"]:
        c = p["concurrency"]
        print(f"\ngroup concurrency limit {c['limit']}: most running at once in a group "
              f"{c['max_running_in_a_group']} (least peak {c['min_peak']}), {c['jobs']} jobs")
    if p["rate"]:
        r = p["rate"]
        print(f"\ngroup rate limit {r['rate']}/1 s over {r['seconds']:g} s: {r['achieved']:.1f}/s "
              f"({r['achieved_over_limit']:.3f} of the limit), busiest second {r['max_in_1s']} "
              f"(bound {r['bound']})")
    if p["fair_turns"]:
        f = p["fair_turns"]
        print(f"\nsmall group's first job: {f['without_big']['wait_ms']:.1f} ms on an idle queue, "
              f"{f['with_big']['wait_ms']:.1f} ms with 100,000 big-group jobs waiting "
              f"({f['with_big']['big_started_between']} big jobs, already buffered, started in "
              f"between; taken by fetch no. {f['with_big']['fetches_until_taken']} after the "
              f"enqueue, {f['without_big']['fetches_until_taken']} on the idle queue)")


if __name__ == "__main__":
    main()
