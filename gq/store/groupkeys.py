"""The Redis keys of a queue's groups (SPEC section 17, gq/scripts/lib/groups.lua): gq's
own, named after the queue so that a hash-tagged queue keeps them in its one Cluster slot.
Every script that touches them is passed all seven, in ``GROUP_KEY_NAMES`` order."""

from __future__ import annotations

from functools import lru_cache

from gq import job as jobs
from gq.errors import EnvelopeError
from gq.tasks import envelope

#: The suffixes, in the order lib/groups.lua's ``group_keys`` reads them.
GROUP_KEY_NAMES = ("ring", "parked", "lines", "state", "limits", "of", "later")


@lru_cache(maxsize=1024)
def group_keys(queue: str) -> tuple[str, ...]:
    """The seven group keys of ``queue``, in script order."""
    return tuple(f"{queue}:groups:{name}" for name in GROUP_KEY_NAMES)


def group_key(queue: str, name: str) -> str:
    """One of them by its name (``"lines"``, ``"limits"``...)."""
    return group_keys(queue)[GROUP_KEY_NAMES.index(name)]


def message_group(message: bytes) -> str:
    """The group a job's message names in its task envelope ("" for none, or for a message
    that is not a task's): where a retried job waits when due (retry.lua). Read only on
    the retry path, never per job fetched."""
    try:
        data = jobs.decode(message).data
        if data[:4] != envelope.MAGIC:
            return ""
        group = envelope.decode(data).opts.get("group")
    except (jobs.MessageDecodeError, EnvelopeError):
        return ""
    return group if isinstance(group, str) else ""
