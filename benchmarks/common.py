"""Shared helpers of the benchmark scripts: a dedicated Redis, machine facts, results.

Not a test module and not part of gq: run the scripts in this folder directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
VENVS = HERE / ".venvs"
WORKERS = HERE / "workers"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def dedicated_redis() -> Iterator[str]:
    """A throwaway redis-server on a free port, no persistence; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--databases", "16", "--loglevel", "warning"],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def redis_pid(url: str) -> int | None:
    import redis

    return int(redis.Redis.from_url(url).info("server")["process_id"])


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def versions(packages: list[str], python: str = sys.executable) -> dict[str, str]:
    """Installed versions of ``packages`` in the environment of ``python``."""
    code = (
        "import json,sys\nfrom importlib import metadata as m\nout={}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p]=m.version(p)\n"
        "    except Exception: out[p]='absent'\n"
        "import platform; out['python']=platform.python_version()\nprint(json.dumps(out))"
    )
    res = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True)
    return json.loads(res.stdout) if res.returncode == 0 else {"error": res.stderr[-300:]}


def machine(url: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory": _mem_total(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": os.getloadavg(),
    }
    if url:
        import redis

        info["redis"] = redis.Redis.from_url(url).info("server")["redis_version"]
    with contextlib.suppress(Exception):
        info["gq_commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True,
        ).stdout.strip() + (" (dirty)" if subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "gq"],
            capture_output=True, text=True).stdout.strip() else "")
    return info


def command() -> str:
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def run_json(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a worker script that prints one JSON object on its last stdout line."""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **(env or {})})
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def median_of(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose ``key`` is the median (an actual run, so its figures agree)."""
    ordered = sorted(runs, key=lambda r: r[key])
    return ordered[(len(ordered) - 1) // 2] if len(ordered) % 2 == 0 else ordered[len(ordered) // 2]


def percentiles(
    values: list[float], points: tuple[float, ...] = (50, 99, 99.9)
) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    out = {}
    for p in points:
        idx = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
        out[f"p{p:g}"] = ordered[idx]
    out["max"] = ordered[-1]
    out["mean"] = statistics.fmean(ordered)
    return out


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    """Poll ``predicate`` every 20 ms until true; RuntimeError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)
