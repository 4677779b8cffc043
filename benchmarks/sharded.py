"""Sharded queues on a local Redis Cluster of 3 masters (issue 35): what a shard costs.

Starts 3 cluster-enabled redis-servers (no replicas, no persistence) and measures, in
one run:

1. **Redis CPU per job on each master**: the same load (enqueue M noop jobs with
   ``perform_many``, then drain them with one worker) on one plain queue and on a queue
   of 3 shards; ``INFO cpu`` (used_cpu_user + used_cpu_sys) and ``INFO commandstats``
   (calls of EVALSHA) deltas of each master over the load, divided by M. An idle
   master's own cost over the same time (cron, cluster bus) is measured alone first.
2. **The spread**: each shard's share of the M jobs, routed by id.
3. **Drain**: one worker (a fresh process: ``gq.Consumer``, noop handler, default
   options) draining a backlog of M jobs on one plain queue and on N = 1, 3, 8 shards,
   runs interleaved, median of --repeat; the ratio of each to the plain queue. Timed in
   the handler: first handler start to the M-th.
4. **Idle pickup over 8 shards**: an idle worker (poll duration 5 s, its default) gets
   one job at a time on a random shard, 30 ms apart; enqueue to handler start, p50/p99.

usage: sharded.py [--quick] [--repeat K] [--jobs M]
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and any(arg.startswith("--child-") for arg in sys.argv):
    from gevent import monkey  # a worker process: patched before anything imports ssl

    monkey.patch_all()

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from common import command, free_port, machine, markdown_table, percentiles, write_json
from redis.cluster import ClusterNode, RedisCluster

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import gq  # noqa: E402
from gq.store.shards import layout  # noqa: E402

MASTERS = 3


def start_cluster(root: Path) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    """Three masters, slots in three equal ranges (``redis-cli --cluster create``)."""
    procs: list[subprocess.Popen[bytes]] = []
    ports: list[int] = []
    try:
        _start_nodes(root, procs, ports)
    except BaseException:
        stop(procs)
        raise
    return procs, ports


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def _start_nodes(root: Path, procs: list[subprocess.Popen[bytes]], ports: list[int]) -> None:
    for i in range(MASTERS):
        port = free_port()
        workdir = root / f"n{i}"
        workdir.mkdir()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file",
             "nodes.conf", "--cluster-port", str(free_port()), "--dir", str(workdir),
             "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        ports.append(port)
    for port in ports:
        _wait(lambda p=port: _ping(p), "redis-server start")
    subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                    "--cluster-replicas", "0", "--cluster-yes"], check=True,
                   capture_output=True)  # fmt: skip
    _wait(lambda: all(_cluster_ok(p) for p in ports), "cluster state ok")


def _ping(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=0.2).ping())
    except redis.RedisError:
        return False


def _cluster_ok(port: int) -> bool:
    info = redis.Redis(port=port).execute_command("CLUSTER INFO")
    if isinstance(info, dict):  # parsed by redis-py
        return str(info.get("cluster_state")) == "ok"
    return "cluster_state:ok" in info.decode()


def _wait(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {what}")
        time.sleep(0.05)


def cpu_and_calls(ports: list[int]) -> dict[int, tuple[float, int]]:
    """Each master's CPU seconds so far and its EVALSHA calls."""
    out = {}
    for port in ports:
        client = redis.Redis(port=port)
        cpu = client.info("cpu")
        calls = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        out[port] = (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), int(calls))
    return out


def owner(client: RedisCluster, queue: str) -> int:
    return int(client.get_node_from_key(f"{queue}:data").port)


# -- 1 and 2: Redis CPU per job on each master, the spread ------------------------------


def cost(url: str, ports: list[int], shards: int | None, jobs: int,
         idle: dict[str, float]) -> dict[str, Any]:  # fmt: skip
    """Enqueue and drain ``jobs`` noop jobs (plain queue if ``shards`` is None)."""
    name = f"cost-{uuid.uuid4().hex[:6]}"
    queue = f"{{{name}}}" if shards is None else name
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[0])])
    before, began = cpu_and_calls(ports), time.monotonic()
    producer = gq.Producer(queue, client=client, shards=shards)
    for start in range(0, jobs, 1000):
        producer.perform_many([b""] * min(1000, jobs - start))
    spread = _spread(client, name, shards) if shards else {}
    drained = drain_child(url, queue, shards, jobs)
    after, seconds = cpu_and_calls(ports), time.monotonic() - began
    per_master = {str(p): round((after[p][0] - before[p][0]) / jobs * 1e6, 2) for p in ports}
    # The same less what the master spends idle (cron, cluster bus) over as long.
    net = {str(p): round(per_master[str(p)] - idle[str(p)] * seconds / jobs, 2) for p in ports}
    calls = {str(p): round((after[p][1] - before[p][1]) / jobs, 3) for p in ports}
    return {"shards": shards, "jobs": jobs, "seconds": round(seconds, 3),
            "redis_us_per_job": per_master, "net_us_per_job": net,
            "evalsha_per_job": calls, "spread": spread, "drain": drained}  # fmt: skip


def _spread(client: RedisCluster, name: str, shards: int) -> dict[str, Any]:
    counts = {q: int(client.llen(f"{q}:active")) for q in layout(name, shards).queues}
    return {q: {"jobs": n, "master": owner(client, q)} for q, n in counts.items()}


def idle_cost(ports: list[int], seconds: float) -> dict[str, float]:
    before = cpu_and_calls(ports)
    time.sleep(seconds)
    after = cpu_and_calls(ports)
    return {str(p): round((after[p][0] - before[p][0]) / seconds * 1e6, 1) for p in ports}


# -- 3: drain ----------------------------------------------------------------------------


def drain_child(url: str, queue: str, shards: int | None, jobs: int) -> dict[str, Any]:
    """Drain ``jobs`` jobs of ``queue`` in a fresh process; its timing."""
    cmd = [sys.executable, __file__, "--child-drain", url, queue, str(shards or 0), str(jobs)]
    out = subprocess.run(cmd, capture_output=True, timeout=600, check=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def child_drain(url: str, queue: str, shards: int, jobs: int) -> None:
    import gevent

    seen = {"n": 0, "first": 0.0, "last": 0.0, "cpu0": 0.0, "cpu1": 0.0}
    consumer = gq.Consumer(queue, url=url, shards={queue: shards} if shards else None)

    def handle(job: gq.Job) -> None:
        if seen["n"] == 0:
            seen["first"], seen["cpu0"] = time.perf_counter(), time.process_time()
        seen["n"] += 1
        if seen["n"] == jobs:
            seen["last"], seen["cpu1"] = time.perf_counter(), time.process_time()
            consumer.stop()

    greenlet = gevent.spawn(consumer.run, handle)
    greenlet.join()
    elapsed = seen["last"] - seen["first"]
    cpu_us = (seen["cpu1"] - seen["cpu0"]) / (jobs - 1) * 1e6  # the worker's own CPU per job
    print(json.dumps({"jobs": jobs, "seconds": elapsed, "rate": (jobs - 1) / elapsed,
                      "cpu_us_per_job": cpu_us}))  # fmt: skip


def fill(client: RedisCluster, queue: str, shards: int | None, jobs: int) -> None:
    producer = gq.Producer(queue, client=client, shards=shards)
    for start in range(0, jobs, 1000):
        producer.perform_many([b""] * min(1000, jobs - start))


def drains(url: str, ports: list[int], jobs: int, repeat: int) -> list[dict[str, Any]]:
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[0])])
    runs: dict[str, list[float]] = {"plain": [], "1": [], "3": [], "8": []}
    cpu: dict[str, list[float]] = {kind: [] for kind in runs}
    for _ in range(repeat):
        for kind in runs:  # interleaved: every kind sees the same machine
            shards = None if kind == "plain" else int(kind)
            name = f"drain-{uuid.uuid4().hex[:6]}"
            queue = f"{{{name}}}" if shards is None else name
            fill(client, queue, shards, jobs)
            drained = drain_child(url, queue, shards, jobs)
            runs[kind].append(drained["rate"])
            cpu[kind].append(drained["cpu_us_per_job"])
    plain, plain_cpu = statistics.median(runs["plain"]), statistics.median(cpu["plain"])
    return [{"queue": "plain" if k == "plain" else f"{k} shards",
             "rate": round(statistics.median(v)), "runs": [round(r) for r in v],
             "ratio": round(statistics.median(v) / plain, 3),
             "cpu_us_per_job": round(statistics.median(cpu[k]), 2),
             "cpu_ratio": round(plain_cpu / statistics.median(cpu[k]), 3)}
            for k, v in runs.items()]  # fmt: skip


# -- 4: idle pickup over 8 shards ---------------------------------------------------------


def child_idle(url: str, queue: str, shards: int, jobs: int) -> None:
    import gevent

    waits: list[float] = []
    consumer = gq.Consumer(queue, url=url, shards={queue: shards}, poller_poll_duration=5.0)

    def handle(job: gq.Job) -> None:
        waits.append(time.time() - float(job.data))
        if len(waits) == jobs:
            consumer.stop()

    greenlet = gevent.spawn(consumer.run, handle)
    greenlet.join()
    print(json.dumps({"waits": waits}))


def idle_pickup(url: str, ports: list[int], jobs: int) -> dict[str, Any]:
    name = f"idle-{uuid.uuid4().hex[:6]}"
    client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[0])])
    plan = layout(name, 8)
    producer = gq.Producer(name, client=client, shards=8)
    producer.perform(b"%f" % time.time())  # declares the layout before the child reads it
    cmd = [sys.executable, __file__, "--child-idle", url, name, "8", str(jobs + 1)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    _wait(lambda: all(client.zcard(f"{q}:consumers") for q in plan.queues), "registered")
    time.sleep(1.0)  # idle: every shard's watcher blocked on its signal
    for _ in range(jobs):
        time.sleep(0.03)
        producer.perform(b"%f" % time.time())
    out, _ = child.communicate(timeout=120)
    waits = json.loads(out.strip().splitlines()[-1])["waits"][1:]
    ms = [w * 1000 for w in waits]
    return {"jobs": jobs, **{k: round(v, 2) for k, v in percentiles(ms).items()}}


# -- the run -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="jobs per load (20,000 --quick, else 50,000)")
    parser.add_argument("--child-drain", nargs=4)
    parser.add_argument("--child-idle", nargs=4)
    args = parser.parse_args()
    if args.child_drain:
        url, queue, shards, jobs = args.child_drain
        child_drain(url, queue, int(shards), int(jobs))
    elif args.child_idle:
        url, queue, shards, jobs = args.child_idle
        child_idle(url, queue, int(shards), int(jobs))
    else:
        run(args.quick, args.repeat, args.jobs)


def run(quick: bool, repeat: int, given: int | None) -> None:
    jobs = given or (20_000 if quick else 50_000)
    root = Path(tempfile.mkdtemp(prefix="gq-sharded-"))
    procs, ports = start_cluster(root)
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/"
    try:
        idle = idle_cost(ports, 3.0)
        costs = [cost(url, ports, None, jobs, idle), cost(url, ports, 3, jobs, idle)]
        drained = drains(url, ports, jobs, repeat)
        pickup = idle_pickup(url, ports, 100 if quick else 300)
    finally:
        stop(procs)
        shutil.rmtree(root, ignore_errors=True)
    report(idle, costs, drained, pickup, jobs)


def report(idle: dict[str, float], costs: list[dict[str, Any]], drained: list[dict[str, Any]],
           pickup: dict[str, Any], jobs: int) -> None:  # fmt: skip
    ports = list(idle)
    rows = [[("plain queue" if c["shards"] is None else f"{c['shards']} shards"), figure,
             *(c[figure][p] for p in ports), round(max(c[figure].values()), 2)]
            for figure in ("redis_us_per_job", "net_us_per_job") for c in costs]  # fmt: skip
    print(f"\nRedis CPU µs per job on each master ({jobs} jobs enqueued and drained; "
          f"idle cost µs/s: {idle})\n")
    print(markdown_table(["queue", "figure", *(f"master :{p}" for p in ports), "busiest"], rows))
    spread = costs[1]["spread"]
    print("\nSpread over 3 shards:", {q: s["jobs"] for q, s in spread.items()},
          "masters:", sorted({s["master"] for s in spread.values()}))
    print("\nOne worker draining a noop backlog\n")
    print(markdown_table(
        ["queue", "jobs/s (median)", "vs plain", "worker CPU µs/job", "plain's CPU / this", "runs"],
        [[d["queue"], d["rate"], d["ratio"], d["cpu_us_per_job"], d["cpu_ratio"], d["runs"]]
         for d in drained]))  # fmt: skip
    print(f"\nIdle pickup over 8 shards (ms): {pickup}")
    write_json("sharded", {"machine": machine(), "command": command(), "idle_us_per_s": idle,
                           "cost": costs, "drain": drained, "idle_pickup_ms": pickup})  # fmt: skip


if __name__ == "__main__":
    main()
