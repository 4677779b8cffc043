"""What the processor makes of a handler's odd endings: a GreenletExit raised by a
handler is a failed attempt, not a stop. (``async def`` handlers, refused here until
issue #17, are awaited on the asyncio loop: gq/worker/asyncio_loop.py.)
"""

from __future__ import annotations


class GreenletExitRaised(Exception):
    """A handler raised gevent.GreenletExit outside a forced stop: a failed attempt."""

    def __init__(self) -> None:
        super().__init__("the handler raised gevent.GreenletExit (not a stop of gq's)")
