"""A GQBackend's ``OPTIONS`` as the arguments of its ``gq.App`` (no Django imports:
unit-tested on any Python). Keys are read in any case (``RESULT_TTL``, ``retries``):

- ``url``: the Redis URL (else gq-worker's ``--url`` in the worker);
- ``SHARDS``: sharded queues, queue name -> count (``{"emails": 8}``), as
  ``gq.App(shards=...)`` takes them (docs/deployment.md, "One queue over many masters");
- ``RESULT_TTL``: seconds a job's outcome is kept (``DEFAULT_RESULT_TTL`` unless given);
- any other: a gq task option, the app's default (``retries``, ``timeout``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Seconds an outcome is kept when OPTIONS has no RESULT_TTL: Django's API reads results
#: by id (``get_result``, ``refresh``), so they are kept unless the settings say not to.
DEFAULT_RESULT_TTL = 86400.0


def app_arguments(options: Mapping[str, Any], queue: str) -> dict[str, Any]:
    """The keyword arguments of ``gq.App`` for a backend's ``OPTIONS`` and first queue."""
    arguments = {key.lower(): value for key, value in options.items()}
    arguments.setdefault("result_ttl", DEFAULT_RESULT_TTL)
    return {**arguments, "queue": queue}
