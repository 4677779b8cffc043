"""The ``gq`` console script (also ``python -m gq.cli.admin``).

Only the standard library is imported at the top: ``gq demo`` runs a consumer in this
process, so ``main`` applies gevent's monkey-patching before anything else is imported.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from gevent import monkey

    monkey.patch_all()

    from gq.cli.admin_cmd import run

    sys.exit(run(argv))


if __name__ == "__main__":
    main()
