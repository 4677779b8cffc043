"""``gq-worker`` as the fault suite runs it: ``python -m tests.fault_worker HANDLER [options]``.

Two test-only changes, made here so that gq itself carries no test hooks:

- the option floors (``gq.options.MINIMUMS``: heartbeat 15 s, consumer timeout 5 s...) are
  lifted, so that a killed worker is recovered in about a second instead of 20;
- ``GQ_TEST_CLOCK_SKEW`` (seconds) moves this process's wall clock (``time.time``) to play a
  host whose clock is off. gq needs no hook for that: liveness uses the server's clock.
"""

from gevent import monkey

monkey.patch_all()  # first, as gq.cli.worker.main does: gq and redis must see patched modules

import os  # noqa: E402
import time  # noqa: E402

from gq import options  # noqa: E402
from gq.cli import worker  # noqa: E402


def main() -> None:
    options.MINIMUMS.clear()
    skew = float(os.environ.get("GQ_TEST_CLOCK_SKEW") or 0)
    if skew:
        real_time = time.time
        time.time = lambda: real_time() + skew
    worker.main()


if __name__ == "__main__":
    main()
