"""Issue 32 item 2: how late a retried or delayed job starts after its due time.

One real gq-worker at default settings (scheduler poll 5 s) on a dedicated Redis, once
with the due-time wake (the default) and once without (`--scheduler-wake off`: curlyq's
poll only, the baseline), for three kinds of jobs:

- retry: a task raises gq.Retry(after=1) on its first run; due 1 s after the raise;
- after: enqueued with perform_after(d), d uniform in 0.5-1.5 s (its due time read back
  from the scheduled set: the server's clock at the enqueue, plus d);
- at:    enqueued with perform_at(now + d).

Beside each of those jobs goes a control job, enqueued ready (perform): its start minus
its enqueue is what any job waits on this machine at that moment, the scheduler apart,
so a tail the control shares is the machine's, not the scheduler's.

The jobs are enqueued at random moments over a few seconds, so their due times fall at
every phase of the poll. The handler (workers/lateness_handler.py) records, on the run
that was due, its start time minus the due time (same host, same clock). Lateness is to
the start, so it includes the fetch; the worker is otherwise idle. CPU per job is the
worker's and Redis's over the whole run (its idle polling included), divided by the jobs
(the control jobs included).

usage: retry_lateness.py [--jobs N] [--window SECONDS]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from common import (
    ROOT,
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    percentiles,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue

import gq

KINDS = ("retry", "after", "at")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def start_worker(url: str, queue: str, wake: bool, log: Path) -> subprocess.Popen:
    """gq-worker of this tree (python -m from the repo root), defaults but the wake."""
    env = {
        **os.environ,
        "BENCH_URL": url,
        "BENCH_OUT": f"{queue}:bench-late",
        "PYTHONPATH": os.pathsep.join([str(WORKERS), str(ROOT)]),
    }
    argv = [
        PYTHON,
        "-m",
        "gq.cli.worker",
        "lateness_handler:handler",
        "--url",
        url,
        "--queue",
        queue,
        "--scheduler-wake",
        "on" if wake else "off",
    ]
    with log.open("w") as err:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def worker_ready(client: redis.Redis, queue: str, wake: bool) -> bool:
    if not client.zcard(f"{queue}:consumers"):
        return False
    channel = f"{queue}:scheduled:due"  # gq/worker/due.py's channel
    return not wake or client.pubsub_numsub(channel)[0][1] >= 1


def send(
    producer: gq.Producer, client: redis.Redis, kind: str, n: int, window: float, rng: random.Random
) -> dict[str, float]:
    """``n`` jobs of ``kind`` at random moments over ``window`` seconds. Returns the due
    time of each ``after`` job as the server set it, read back from the scheduled set: a
    producer held up between its clock read and the enqueue must not count as late."""
    dues: dict[str, float] = {}
    start = time.time()
    for moment in sorted(rng.uniform(0, window) for _ in range(n)):
        time.sleep(max(0.0, start + moment - time.time()))
        producer.perform(f"now {time.time()!r}".encode())  # the control, beside each job
        if kind == "retry":
            producer.perform(b"retry")
            continue
        delay = rng.uniform(0.5, 1.5)
        if kind == "after":
            job_id = producer.perform_after(delay, b"after")
            dues[job_id] = float(client.zscore(f"{producer.queue}:scheduled", job_id))
        else:
            due = time.time() + delay
            producer.perform_at(due, f"at {due!r}".encode())
    return dues


def lateness_ms(entries: list[bytes], dues: dict[str, float]) -> list[float]:
    """Each job's start minus its due time, in ms ("after ID START" or "KIND SECONDS")."""
    out = []
    for entry in entries:
        fields = entry.decode().split()
        late = float(fields[2]) - dues[fields[1]] if fields[0] == "after" else float(fields[1])
        out.append(late * 1000)
    return out


def run(url: str, kind: str, wake: bool, n: int, window: float, seed: int) -> dict:
    queue = f"bench-late-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    log = Path(tempfile.gettempdir()) / f"{queue}.log"
    proc = start_worker(url, queue, wake, log)
    try:
        wait_for(lambda: worker_ready(client, queue, wake), 30, "the worker to start")
        cpu0, rcpu0, t0 = cpu_seconds(proc.pid), redis_cpu(client), time.perf_counter()
        dues = send(gq.Producer(queue, url=url), client, kind, n, window, random.Random(seed))
        out = f"{queue}:bench-late"
        wait_for(lambda: client.llen(out) >= 2 * n, window + 30, f"{n} {kind} jobs")
        cpu, rcpu = cpu_seconds(proc.pid) - cpu0, redis_cpu(client) - rcpu0
        seconds = time.perf_counter() - t0
        entries = client.lrange(out, 0, -1)
        control = lateness_ms([e for e in entries if e.startswith(b"now ")], dues)
        late = lateness_ms([e for e in entries if not e.startswith(b"now ")], dues)
    except Exception:
        sys.stderr.write(log.read_text()[-3000:])
        raise
    finally:
        proc.terminate()
        proc.wait(30)
        delete_queue(url, queue)
        log.unlink(missing_ok=True)
    return {
        "kind": kind,
        "wake": wake,
        "n": len(late),
        "seconds": seconds,
        "worker_cpu_ms_per_job": cpu * 1000 / (2 * n),  # the control jobs included
        "redis_cpu_ms_per_job": rcpu * 1000 / (2 * n),
        "lateness_ms": percentiles(late),
        "control_ms": percentiles(control),
        "early": sum(1 for x in late if x < 0),
    }


def row(result: dict, base: dict) -> list:
    late = result["lateness_ms"]
    ratio = base["lateness_ms"]["p99"] / max(late["p99"], 0.001)
    return [
        result["kind"],
        "on" if result["wake"] else "off (baseline)",
        result["n"],
        late["p50"],
        late["p99"],
        late["max"],
        result["control_ms"]["p99"],
        f"{ratio:.0f}x" if result["wake"] else "1x",
        result["worker_cpu_ms_per_job"],
        result["redis_cpu_ms_per_job"],
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300, help="jobs of each kind and mode")
    ap.add_argument("--window", type=float, default=6.0, help="seconds the enqueues spread over")
    ap.add_argument("--seed", type=int, default=32)
    args = ap.parse_args()
    results, rows = [], []
    with dedicated_redis() as url:
        info = machine(url)
        for kind in KINDS:
            pair = [
                run(url, kind, wake, args.jobs, args.window, args.seed) for wake in (False, True)
            ]
            results += pair
            rows += [row(pair[0], pair[0]), row(pair[1], pair[0])]
            print(rows[-2], rows[-1], sep="\n", file=sys.stderr, flush=True)
    payload = {
        "workload": "start lateness after the due time (ms), gq-worker defaults "
        "(scheduler poll 5 s), due-time wake on vs off",
        "machine": info,
        "command": command(),
        "jobs": args.jobs,
        "window": args.window,
        "seed": args.seed,
        "versions": versions(["gq", "redis", "hiredis", "gevent"]),
        "results": results,
    }
    write_json("retry_lateness", payload)
    print(
        markdown_table(
            [
                "kind",
                "wake",
                "jobs",
                "p50 ms",
                "p99 ms",
                "max ms",
                "control p99 ms",
                "p99 off / on",
                "worker CPU ms/job",
                "Redis CPU ms/job",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
