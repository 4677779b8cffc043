"""The Go original, curlyq, draining the same queue as gq: its real Consumer, built from
../shared/go with the interop tests' program (tests/interop/go/consumer), timed the way
workers/probe.py times every Python worker (first handler start to N-th handler end, the
process's own CPU time and peak RSS), at the concurrency and buffer gq's row uses.

Go's build cache goes to GQ_INTEROP_CACHE or ~/.cache/gq-interop, the binary to a temp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gqbench import delete_queue, prefill

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "interop" / "go" / "consumer"
CURLYQ_VERSION = "v1.0.0-rc2 (66594e75), go-redis v7.2.0"


def go_tree() -> Path:
    return Path(os.environ.get("GQ_SHARED_DIR") or ROOT.parent / "shared").resolve() / "go"


def build(out_dir: str) -> str:
    """Build the Go consumer into ``out_dir``; raise with the reason when it cannot be."""
    go = shutil.which("go")
    if go is None or not (go_tree() / "src/github.com/mcmathja/curlyq").is_dir():
        raise RuntimeError("needs `go` and ../shared/go (apt-get install -y golang-go)")
    cache = os.environ.get("GQ_INTEROP_CACHE") or os.path.expanduser("~/.cache/gq-interop")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(go_tree()),
        "CGO_ENABLED": "0",
        "GOCACHE": os.path.join(cache, "go-build"),
        "GOFLAGS": "",
    }
    binary = os.path.join(out_dir, "curlyq-consumer")
    subprocess.run(
        [go, "build", "-o", binary, f"./{SOURCE.relative_to(ROOT)}"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return binary


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        return "missing"
    return subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()


def curlyq_drain(
    url: str, n: int, concurrency: int, buffer: int, sleep_ms: float = 0, timeout: float = 300
) -> dict[str, Any]:
    """Pre-fill ``n`` jobs (as gq's row does), then run curlyq's consumer until it ran them."""
    parts = urlsplit(url)
    if parts.path.strip("/") not in ("", "0"):
        raise RuntimeError("curlyq reaches database 0 only")
    queue = f"bench-curlyq-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(tmp)
        out = os.path.join(tmp, "result.json")
        env = {**os.environ, "BENCH_N": str(n), "BENCH_OUT": out}
        cmd = [
            binary,
            "-addr",
            f"{parts.hostname}:{parts.port or 6379}",
            "-queue",
            queue,
            "-concurrency",
            str(concurrency),
            "-buffer",
            str(buffer),
            "-sleep",
            f"{sleep_ms}ms",
        ]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            limit = time.monotonic() + timeout
            while not os.path.exists(out):
                if proc.poll() is not None or time.monotonic() > limit:
                    raise RuntimeError(f"curlyq gave no result: {proc.stderr.read()[-800:]!r}")
                time.sleep(0.05)
            with open(out) as fh:
                return json.load(fh)  # type: ignore[no-any-return]
        finally:
            proc.kill()
            proc.wait(10)
            delete_queue(url, queue)
