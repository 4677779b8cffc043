"""The ``gq-worker`` console script (also ``python -m gq.cli.worker``).

Only the standard library is imported at the top: ``main`` applies gevent's
monkey-patching before gq, redis or the handler's module are imported, so that every
socket, lock and sleep they create cooperates with gevent.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from gevent import monkey

    monkey.patch_all()

    from gq.cli.worker_cmd import run

    sys.exit(run(argv))


if __name__ == "__main__":
    main()
