"""The job log filter under its earlier import path; it lives in gq.tasks.joblog."""

from gq.tasks.joblog import JobFields

__all__ = ["JobFields"]
