"""The ids gq gives task jobs: UUIDs of version 7 (RFC 9562), whose first 48 bits are the
milliseconds of their making, so that a job's enqueue time is read from its id alone:
it survives retries and curlyq's rewrite of a message (ID, Attempt, Data), and costs no
byte in the envelope and no Redis command (docs/decisions.md)."""

from __future__ import annotations

import os
import time

_VERSION_7 = 0x7 << 76
_VARIANT = 0b10 << 62
_RAND_A = 0xFFF << 64
_RAND_B = (1 << 62) - 1


def new_id() -> str:
    """A new job id: a UUIDv7 in its usual text form (36 characters)."""
    rand = int.from_bytes(os.urandom(10), "big")
    value = (time.time_ns() // 1_000_000) << 80 | _VERSION_7 | (rand << 52) & _RAND_A
    h = f"{value | _VARIANT | rand & _RAND_B:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def id_time(job_id: str) -> float | None:
    """When a job whose id starts with a UUIDv7 (``new_id``'s, or a workflow step's
    ``<id>.<i>``) was made, in unix seconds; None for any other id."""
    head = job_id[:36]
    if len(head) != 36 or head[14] != "7" or head[19] not in "89ab" or head[8] != "-":
        return None
    try:
        return int(head[:8] + head[9:13], 16) / 1000.0
    except ValueError:
        return None
