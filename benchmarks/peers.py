"""Workload 5: gq (its byte API and its task API), the ceiling loop, curlyq (the Go
original) and six peers side by side, in one run, on one Redis.

Each peer is installed in its own venv under benchmarks/.venvs/ (setup_venvs.sh), and its
worker runs as a subprocess in its recommended high-concurrency configuration against a
dedicated redis-server started for this run (a database of its own per peer). Jobs are
enqueued first (not timed), then the worker starts; every worker is timed the same way,
inside its handlers (workers/probe.py): from the first handler's start to the N-th
handler's end, with the worker process's own CPU time and RSS. curlyq's consumer
(benchmarks/curlyq.py) drains the same pre-filled queue at gq's concurrency and buffer.
Every peer runs through its own task API; gq twice: the byte API (a Consumer in the
worker script, as before) and the task API ("gq-task": ``@app.task`` + ``enqueue_many``,
``gq-worker peer_gq:app``), with the same N, C and buffer.

usage: peers.py [--quick] [--repeat K] [--only rq,celery,...] [--name peers]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import redis
from asyncbench import gq_async_task_drain
from common import (
    VENVS,
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    versions,
    write_json,
)
from curlyq import CURLYQ_VERSION, curlyq_drain, go_version
from gqbench import ceiling_drain, gq_drain, strip

HUEY_LAUNCH = (
    "from gevent import monkey; monkey.patch_all()\n"
    "from huey.bin.huey_consumer import consumer_main; consumer_main()"
)

# name: (db, packages for the version record, worker command, concurrency note, delivery)
# gq's task API, run like a peer (workers/peer_gq.py) but with gq's N, C and buffer.
GQ_TASK: dict[str, Any] = {
    "db": 7, "packages": ["gq", "redis", "hiredis", "gevent", "msgpack"],
    "cmd": lambda v, url, c: [f"{v}/bin/gq-worker", "peer_gq:app", "--url", url,
                              "--concurrency", str(c), "--buffer-size", str(min(c, 1000)),
                              "--log-level", "WARNING"],
    "config": "gq-worker peer_gq:app --concurrency C --buffer-size min(C, 1000): "
              "@app.task tasks enqueued with enqueue_many",
    "delivery": "at-least-once, as gq's byte API",
}

PEERS: dict[str, dict[str, Any]] = {
    "rq": {
        "db": 1, "packages": ["rq", "redis", "hiredis"],
        "cmd": lambda v, url, c: [f"{v}/bin/rq", "worker", "--url", url, "--worker-class",
                                  "rq.worker.SimpleWorker", "--logging_level", "WARNING",
                                  "bench"],
        "config": "rq worker --worker-class rq.worker.SimpleWorker (one job at a time, no fork)",
        "delivery": "at-least-once-ish: a job is in a StartedJobRegistry while running; "
                    "an abandoned job is marked failed, not re-run, unless retries are set",
    },
    "celery": {
        "db": 2, "packages": ["celery", "kombu", "redis", "hiredis", "gevent"],
        "cmd": lambda v, url, c: [f"{v}/bin/celery", "-A", "peer_celery", "worker", "-P",
                                  "gevent", "-c", str(c), "-Q", "bench", "--loglevel",
                                  "WARNING", "--without-gossip", "--without-mingle",
                                  "--without-heartbeat"],
        "config": "celery worker -P gevent -c C, task_acks_late=True, ignore_result",
        "delivery": "at-least-once with acks_late (unacked messages return after the "
                    "visibility timeout, 1 h by default)",
    },
    "dramatiq": {
        "db": 3, "packages": ["dramatiq", "redis", "hiredis", "gevent"],
        "cmd": lambda v, url, c: [f"{v}/bin/dramatiq-gevent", "peer_dramatiq", "-p", "1",
                                  "-t", str(c)],
        "config": "dramatiq-gevent -p 1 -t C, max_retries=0",
        "delivery": "at-least-once (messages acked after the actor ran; requeued from a "
                    "dead worker's ack set after heartbeat timeout)",
    },
    "huey": {
        "db": 4, "packages": ["huey", "redis", "hiredis", "gevent"],
        "cmd": lambda v, url, c: [f"{v}/bin/python", "-c", HUEY_LAUNCH, "peer_huey.huey",
                                  "-k", "greenlet", "-w", str(c), "-d", "0.01"],
        "config": "huey_consumer -k greenlet -w C -d 0.01 (monkey-patched), results=False",
        "delivery": "at-most-once: a task is popped (RPOP/BRPOP) before it runs; a crash "
                    "loses it",
    },
    "arq": {
        "db": 5, "packages": ["arq", "redis", "hiredis"],
        "cmd": lambda v, url, c: [f"{v}/bin/arq", "peer_arq.WorkerSettings"],
        "config": "arq worker, max_jobs=C, keep_result=0, poll_delay=0.05 s (default 0.5)",
        "delivery": "at-least-once-ish: jobs stay in the queue with an in-progress key "
                    "(expires); polled, pessimistic execution",
    },
    "taskiq": {
        "db": 7, "packages": ["taskiq", "taskiq-redis", "redis"],
        "cmd": lambda v, url, c: [f"{v}/bin/taskiq", "worker", "peer_taskiq:broker",
                                  "--workers", "1", "--max-async-tasks", str(c),
                                  "--no-configure-logging"],
        "config": "taskiq worker --workers 1 --max-async-tasks C, taskiq-redis "
                  "RedisStreamBroker (xread_count 100), ack when executed",
        "delivery": "at-least-once: a Redis stream consumer group; acked after the task "
                    "ran; an unacked message is reclaimed after idle_timeout (10 min)",
    },
    "streaq": {
        "db": 8, "packages": ["streaq", "redis"],
        "cmd": lambda v, url, c: [f"{v}/bin/streaq", "run", "peer_streaq:worker"],
        "config": "streaq run, Worker(concurrency=C)",
        "delivery": "at-least-once: Redis streams with a consumer group; idle messages "
                    "are reclaimed after idle_timeout",
    },
    "saq": {
        "db": 6, "packages": ["saq", "redis", "hiredis"],
        "cmd": lambda v, url, c: [f"{v}/bin/saq", "peer_saq.settings"],
        "config": "saq worker, concurrency=C",
        "delivery": "at-least-once: BLMOVE to an active list; a stuck job is retried after "
                    "its timeout by the sweeper",
    },
}


def peer_url(base: str, db: int) -> str:
    return base.rsplit("/", 1)[0] + f"/{db}"


def run_peer(name: str, base_url: str, task: str, n: int, concurrency: int, sleep_ms: float,
             deadline: float) -> dict[str, Any]:
    spec = GQ_TASK if name == "gq-task" else PEERS[name]
    venv = str(VENVS / ("gq" if name == "gq-task" else name))
    url = peer_url(base_url, spec["db"])
    redis.Redis.from_url(url).flushdb()  # our own dedicated server's database
    env = {**os.environ, "BENCH_URL": url, "PYTHONPATH": str(WORKERS), "BENCH_N": str(n),
           "BENCH_SLEEP_MS": str(sleep_ms), "BENCH_DEADLINE": str(deadline),
           "BENCH_C": str(concurrency)}
    t = time.perf_counter()
    script = "peer_gq.py" if name == "gq-task" else f"peer_{name}.py"
    subprocess.run([f"{venv}/bin/python", script, url, task, str(n)], cwd=WORKERS,
                   env=env, check=True, capture_output=True, timeout=300)
    enqueue_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp, open(os.path.join(tmp, "worker.log"), "w+") as log:
        out = os.path.join(tmp, "result.json")
        env["BENCH_OUT"] = out
        cmd = spec["cmd"](venv, url, concurrency)
        proc = subprocess.Popen(cmd, cwd=WORKERS, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        limit = time.monotonic() + deadline + 60
        try:
            while not os.path.exists(out):
                if proc.poll() is not None or time.monotonic() > limit:
                    log.seek(0)
                    raise RuntimeError(f"{name} worker gave no result: {log.read()[-1500:]}")
                time.sleep(0.05)
            with open(out) as f:
                result = json.load(f)
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is None:
                    os.killpg(proc.pid, sig)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(5)
    redis.Redis.from_url(url).flushdb()
    result["enqueue_rate"] = n / enqueue_s
    return strip(result)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--only", default=",".join(PEERS))
    ap.add_argument("--name", default="peers", help="write results/<name>.json")
    ap.add_argument("--workloads", default="", help="a subset of the workloads, by name")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    peers = [p for p in args.only.split(",") if p]
    n_peer = 3000 if args.quick else 10000
    n_gq = 20000 if args.quick else 50000
    deadline = 8.0 if args.quick else 15.0
    workloads = {
        "noop": {"task": "noop", "C": 100, "sleep_ms": 0},
        "io_100ms_C1000": {"task": "sleepy", "C": 1000, "sleep_ms": 100},
        # The asyncio peers' workloads at both concurrencies (issue 21).
        "noop_C1000": {"task": "noop", "C": 1000, "sleep_ms": 0},
        "io_100ms_C100": {"task": "sleepy", "C": 100, "sleep_ms": 100},
    }
    if args.workloads:
        workloads = {k: workloads[k] for k in args.workloads.split(",")}
    results: dict[str, Any] = {"workloads": workloads, "runs": {}}
    with dedicated_redis() as url:
        results["machine"] = machine(url)
        for wname, w in workloads.items():
            runs: dict[str, list[dict[str, Any]]] = {}
            for rep in range(repeat):
                # gq's row and curlyq's (the Go original) use the same N, C and buffer.
                n, buffer = (n_gq, 100) if w["task"] == "noop" else (n_peer, 1000)
                if w["task"] == "noop":
                    runs.setdefault("ceiling", []).append(strip(ceiling_drain(url, n_gq, 100)))
                runs.setdefault("gq", []).append(
                    strip(gq_drain(url, n, w["C"], buffer, w["sleep_ms"])))
                runs.setdefault("gq async tasks", []).append(
                    strip(gq_async_task_drain(url, n, w["C"], buffer, w["sleep_ms"], w["task"])))
                try:
                    runs.setdefault("gq-task", []).append(
                        run_peer("gq-task", url, w["task"], n, w["C"], w["sleep_ms"], 300.0))
                except Exception as exc:  # noqa: BLE001 - reported like a failing peer
                    runs.setdefault("gq-task", []).append({"error": str(exc)[-800:]})
                try:
                    runs.setdefault("curlyq", []).append(
                        curlyq_drain(url, n, w["C"], buffer, w["sleep_ms"]))
                except Exception as exc:  # noqa: BLE001 - no Go here: reported, not fatal
                    runs.setdefault("curlyq", []).append({"error": str(exc)[-800:]})
                for name in peers:
                    try:
                        runs.setdefault(name, []).append(
                            run_peer(name, url, w["task"], n_peer, w["C"], w["sleep_ms"],
                                     deadline))
                    except Exception as exc:  # noqa: BLE001 - a failing peer is reported, not fatal
                        runs.setdefault(name, []).append({"error": str(exc)[-800:]})
                    print(f"{wname} rep {rep} {name}: "
                          f"{runs[name][-1].get('rate', runs[name][-1].get('error'))}",
                          file=sys.stderr, flush=True)
            results["runs"][wname] = runs
    results["versions"] = {"gq": versions(["gq", "redis", "hiredis", "gevent", "greenlet",
                                           "msgpack"]),
                           "curlyq": {"curlyq": CURLYQ_VERSION, "go": go_version()}}
    for name in peers:
        results["versions"][name] = versions(PEERS[name]["packages"],
                                             str(VENVS / name / "bin" / "python"))
    results["configs"] = {name: {"config": PEERS[name]["config"],
                                 "delivery": PEERS[name]["delivery"]} for name in peers}
    results["configs"]["gq-task"] = {"config": GQ_TASK["config"],
                                     "delivery": GQ_TASK["delivery"]}
    results["command"] = command()
    results["repeat"] = repeat
    results["summary"] = summarise(results, peers)
    write_json(args.name, results)
    print(render(results, peers))


def summarise(results: dict[str, Any], peers: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wname, runs in results["runs"].items():
        rows = {}
        for name, rs in runs.items():
            ok = [r for r in rs if "rate" in r]
            if not ok:
                rows[name] = {"error": rs[-1].get("error", "no result")}
                continue
            rates = sorted(r["rate"] for r in ok)
            med = statistics.median(rates)
            best = min(ok, key=lambda r: abs(r["rate"] - med))
            rows[name] = {"rate": med, "rates": rates, "cpu_us_per_job": best["cpu_us_per_job"],
                          "rss_peak_mb": best["rss_peak_mb"], "n": best["n"],
                          "capped": best.get("capped", False), "elapsed": best["elapsed"]}
        gq_rate = rows["gq"]["rate"]
        for name, row in rows.items():
            if "rate" in row and name != "gq":
                row["gq_ratio"] = gq_rate / row["rate"]
        ok_peers = [rows[p]["rate"] for p in peers if "rate" in rows.get(p, {})]
        out[wname] = {"rows": rows, "best_peer_rate": max(ok_peers) if ok_peers else None,
                      "gq_vs_best_peer": gq_rate / max(ok_peers) if ok_peers else None}
        if "ceiling" in rows:
            out[wname]["gq_vs_ceiling"] = gq_rate / rows["ceiling"]["rate"]
        if "rate" in rows.get("gq-task", {}):
            out[wname]["gq_task_vs_gq"] = rows["gq-task"]["rate"] / gq_rate
    return out


def render(results: dict[str, Any], peers: list[str]) -> str:
    parts = []
    for wname, summary in results["summary"].items():
        w = results["workloads"][wname]
        rows = []
        for name, row in summary["rows"].items():
            if "error" in row:
                rows.append([name, "failed", "", "", "", row["error"][:80]])
                continue
            rows.append([name, row["rate"], row["cpu_us_per_job"], row["rss_peak_mb"],
                         f"{row['gq_ratio']:.1f}x" if "gq_ratio" in row else "-",
                         f"{row['n']:,} jobs" + (" (time cap)" if row["capped"] else "")])
        title = (f"**{wname}** (C={w['C']}"
                 + (f", handlers sleep {w['sleep_ms']} ms" if w["sleep_ms"] else ", noop") + ")")
        parts.append(title + "\n\n" + markdown_table(
            ["worker", "jobs/s (median)", "CPU µs/job", "peak RSS MB", "gq ÷ this", "measured"],
            rows))
    return "\n\n".join(parts)


if __name__ == "__main__":
    main()
