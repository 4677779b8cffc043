"""Testing an app's tasks without a worker process: ``gq.testing.eager(app)`` runs each
enqueue at once, ``gq.testing.worker(app)`` drains what the test enqueued in-process.

The kit lives with the task layer (gq.tasks.testing); this is its public name."""

from gq.tasks.testing import Outcome, Worker, eager, worker

__all__ = ["Outcome", "Worker", "eager", "worker"]
