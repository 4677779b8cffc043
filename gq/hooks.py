"""The hooks' events under their earlier import path; they live in gq.tasks.hooks."""

from gq.tasks.hooks import Attempt, Enqueueing

__all__ = ["Attempt", "Enqueueing"]
