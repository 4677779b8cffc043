"""``gq-worker --processes`` as the supervisor tests run it:
``python -m tests.supervised_worker HANDLER --processes N [options]``.

Test-only changes, made here so that gq itself carries no test hooks (as in
tests/fault_worker.py):

- the option floors (heartbeat 15 s, consumer timeout 5 s...) are lifted, so that a
  SIGKILLed child's jobs are recovered in about a second instead of 20;
- the supervisor starts its children through this module too, so they get the same;
- the restart backoff cap and the memory check interval are lowered, so that a crash loop
  gives up and a memory limit recycles within a second or two.

The supervisor stays unpatched, as under ``gq-worker``; children patch first.
"""

import sys

from gq.cli import worker  # the standard library only: patching can still come first


def main() -> None:
    argv = sys.argv[1:]
    if not worker.supervises(argv):
        from gevent import monkey

        monkey.patch_all()
    from gq import options
    from gq.cli import supervised, supervisor

    options.MINIMUMS.clear()
    supervisor.CHILD_COMMAND = [sys.executable, "-m", "tests.supervised_worker"]
    supervisor.RESTART_BACKOFF_CAP = 0.3
    supervised.MEMORY_CHECK_INTERVAL = 0.1
    worker.main(argv)


if __name__ == "__main__":
    main()
