"""The jittered exponential backoff shared by job retries and the maintenance loops."""

from __future__ import annotations

import random

# 2**64 seconds is far past any cap anyone sets; stopping the exponent there keeps
# the float finite for absurd attempt counts.
_MAX_EXPONENT = 64


def backoff(attempt: int, cap: float, rand: float | None = None) -> float:
    """Seconds to wait after ``attempt``: ``min(cap, (1 + random()) * 2**attempt / 2)``.

    The delay lies in [2**attempt / 2, 2**attempt), curlyq's formula, so attempt 6
    waits between 32 and 64 seconds.
    """
    jitter = random.random() if rand is None else rand
    exponent = min(max(attempt, 0), _MAX_EXPONENT)
    return float(min(cap, (1.0 + jitter) * 2.0**exponent / 2.0))
