"""``gq.App``: the registry of an application's tasks, their producer, and the
dispatcher a worker runs them with (``gq-worker myapp.tasks:app``), SPEC section 14."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

import redis

from gq.errors import ConfigurationError
from gq.job import Job
from gq.periodic import Periodic
from gq.producer import DEFAULT_MAX_MESSAGE_BYTES, ProducerCore
from gq.store.config import check_queue_name, resolve_client
from gq.store.outcomes import gathered
from gq.store.tasks import TaskQueue
from gq.tasks import enqueuer
from gq.tasks.hooks import EnqueueRun, Hook, Hooks
from gq.tasks.options import split
from gq.tasks.periodic_data import periodic_data
from gq.tasks.results import Result, off_loop
from gq.tasks.sharding import Sharding, check_app_shards
from gq.tasks.sharding import parts as parts_of
from gq.tasks.task import Call, P, R, Signature, Task
from gq.worker.call import Plan

if TYPE_CHECKING:
    from gq.store.aio import AsyncRedisQueue
    from gq.tasks.dispatch import Dispatcher

H = TypeVar("H", bound=Callable[[Job], object])

#: How long a reading of the Redis server's clock is trusted (carried on the monotonic
#: clock) before it is taken again.
CLOCK_REFRESH = 600.0


class App:
    """An application's tasks. ``url`` or ``client`` reach Redis (a ``redis.Redis``, a
    cluster or Sentinel client; ``aclient``, a ``redis.asyncio`` one, for ``aenqueue``
    when no ``url`` is given); ``queue`` is the tasks' default queue; ``shards`` makes
    queues sharded (``{"emails": 8}``: gq/tasks/sharding.py); the other keywords
    are the defaults of the task options (``retries``, ``timeout``, ``backoff``...), which
    ``@app.task(...)`` and ``.using(...)`` override, and which fall back to the worker's
    flags when unset."""

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | Any | None = None,
        aclient: Any | None = None,
        queue: str = "default",
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
        shards: Mapping[str, int] | None = None,
        **defaults: Any,
    ) -> None:
        self.url = url
        self.queue = check_queue_name(queue)
        self.defaults = split(defaults)
        self.max_message_bytes = max_message_bytes
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.raw_handlers: dict[str, Callable[[Job], object]] = {}
        self.schedules: list[Periodic] = []
        self._client = client
        self._aclient = aclient
        self.sharding = Sharding(check_app_shards(shards), self._sync_client)
        self._stores: dict[str, tuple[TaskQueue, ProducerCore]] = {}
        self._astores: dict[str, AsyncRedisQueue] = {}
        self._dispatcher: Dispatcher | None = None
        self._offset: tuple[float, float] | None = None  # (server - monotonic, taken at)
        self.hooks = Hooks()
        #: gq.testing.eager's runner: when set, enqueue runs tasks here instead of writing.
        self.eager: Callable[[enqueuer.Batch], list[Result[Any]]] | None = None

    # -- registering ----------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R]) -> Task[P, R]: ...

    @overload
    def task(
        self, *, name: str | None = None, queue: str | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        queue: str | None = None,
        **options: Any,
    ) -> Any:
        """Register a function as a task, bare (``@app.task``: named "module.qualname",
        on the app's queue, with the app's defaults) or with options (``name``,
        ``queue``, ``retries``, ``backoff``, ``timeout``, ``unique_for``,
        ``unique_key``, ``expires``, ``result_ttl``, ``group``)."""
        task_options = split(options).over(self.defaults)
        target = self.check_queue(queue) if queue is not None else self.queue

        def register(function: Callable[P, R]) -> Task[P, R]:
            task_name = name or f"{function.__module__}.{function.__qualname__}"
            if not isinstance(task_name, str) or not task_name:
                raise ConfigurationError(f"a task name is a non-empty str, not {task_name!r}")
            _refuse_main(task_name)
            if task_name in self.tasks:
                raise ConfigurationError(
                    f"two tasks are named {task_name!r}: {self.tasks[task_name].fn!r} and "
                    f"{function!r}; give one of them name=..."
                )
            registered = Task(self, function, task_name, target, task_options)
            self.tasks[task_name] = registered
            self._forget_dispatcher()
            return registered

        return register(fn) if fn is not None else register

    def raw(self, *, queue: str) -> Callable[[H], H]:
        """Register a byte handler (``gq.Job`` in) for the jobs of ``queue`` that are not
        task envelopes; the app's worker serves that queue too."""
        name = self.check_queue(queue)

        def register(handler: H) -> H:
            if name in self.raw_handlers:
                raise ConfigurationError(f"queue {name!r} has a raw handler already")
            self.raw_handlers[name] = handler
            self._forget_dispatcher()
            return handler

        return register

    def periodic(
        self,
        name: str,
        sig: Signature[Any],
        *,
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
    ) -> Periodic:
        """A periodic entry (SPEC section 11's guarantee: each occurrence enqueued once,
        with no leader) that enqueues the call ``sig`` (``task.s(...)``) on its task's
        queue, whichever queues the worker serves."""
        if not isinstance(sig, Signature):
            raise ConfigurationError(f"app.periodic takes task.s(...), not {sig!r}")
        data = periodic_data(sig)
        schedule = Periodic(name, cron=cron, every=every, data=data, tz=tz, queue=sig.task.queue)
        if any(s.name == name for s in self.schedules):
            raise ConfigurationError(f"two periodic entries are named {name!r}")
        self.schedules.append(schedule)
        return schedule

    # -- hooks (hooks.py: where integrations plug in) ---------------------------------------

    def on_enqueue(self, hook: Hook) -> Hook:
        """Call ``hook(gq.tasks.hooks.Enqueueing)`` for every job enqueued, before its envelope
        is written (it may set ``headers``); a context manager it returns wraps the write."""
        self.hooks.enqueue.append(hook)
        return hook

    def before_job(self, hook: Hook) -> Hook:
        """Call ``hook(gq.tasks.hooks.Attempt)`` before each run of a task's job; a context
        manager it returns wraps the run (exited with the run's exception)."""
        self.hooks.before.append(hook)
        self._forget_dispatcher()
        return hook

    def after_job(self, hook: Hook) -> Hook:
        """Call ``hook(gq.tasks.hooks.Attempt)`` after each run of a task's job, with its
        ``outcome``, ``error``, ``result`` and ``duration``."""
        self.hooks.after.append(hook)
        self._forget_dispatcher()
        return hook

    @property
    def queues(self) -> list[str]:
        """Every queue the app's tasks and raw handlers name, in registration order."""
        names = [t.queue for t in self.tasks.values()] + list(self.raw_handlers)
        return list(dict.fromkeys(names)) or [self.queue]

    def check_queue(self, queue: str) -> str:
        return check_queue_name(queue)

    # -- running (the worker's side) --------------------------------------------------------

    def dispatcher(self) -> Dispatcher:
        """The dispatcher over the tasks registered so far (rebuilt after a registration)."""
        if self._dispatcher is None:
            from gq.tasks import progress
            from gq.tasks.dispatch import Dispatcher

            progress.use(self._progress_client)
            self._dispatcher = Dispatcher(
                self.tasks, self.raw_handlers, self.server_now, self.hooks, self.gather_results
            )
        return self._dispatcher

    def _progress_client(self, queue: str) -> Any:
        """The client a task's progress is written with; None for an app with no Redis."""
        return self._store(queue)[0].client if self.connected() else None

    def _forget_dispatcher(self) -> None:
        self._dispatcher = None

    @property
    def plan(self) -> Callable[[Job], Plan]:
        """``plan(job)``: how a worker runs ``job`` (gq.tasks.dispatch); a consumer given the app
        calls it for every job. The dispatcher's own method, so that a job costs no call
        through the app."""
        return self.dispatcher().plan

    def __call__(self, job: Job) -> object:
        """Run one job here (a byte handler's signature; the consumer uses ``plan``)."""
        return self.plan(job).run()

    # -- enqueueing (the producer's side) ------------------------------------------------

    def connect(
        self, url: str | None = None, client: Any | None = None, aclient: Any | None = None
    ) -> None:
        """Reach Redis through ``url`` or ``client`` (and ``aclient``) from now on
        (gq-worker gives an app without one its ``--url``; gq.testing an embedded server)."""
        self.url, self._client, self._aclient = url, client, aclient
        self._stores.clear()
        self._astores.clear()
        self._offset = None
        self.sharding = Sharding(self.sharding.counts, self._sync_client)

    def connection(self) -> tuple[str | None, Any | None, Any | None]:
        """The ``url``, ``client`` and ``aclient`` the app reaches Redis with."""
        return self.url, self._client, self._aclient

    def connected(self) -> bool:
        """Whether the app was given a way to reach Redis."""
        return self.url is not None or self._client is not None

    def enqueued_queues(self) -> list[str]:
        """The queues this app has enqueued to since it was (re)connected."""
        return list(self._stores)

    def _store(self, queue: str) -> tuple[TaskQueue, ProducerCore]:
        store = self._stores.get(queue)
        if store is None and queue in self.sharding.counts:  # (a read not of a job's)
            return self._store(self.sharding.home(queue))
        if store is None:
            store = self._stores[queue] = (
                TaskQueue(self._sync_client(), queue),
                ProducerCore(queue, self.max_message_bytes),
            )
        return store

    def _sync_client(self) -> Any:
        """The blocking client: ``client``, else the one the stores share, else one of
        ``url``, else a twin of ``aclient`` (given alone: Result.aget reads with it)."""
        client = self._client
        if client is None:
            client = next((q.client for q, _ in self._stores.values()), None)
        if client is None and self.url is None and self._aclient is not None:
            from gq.store.twin import sync_twin

            client = sync_twin(self._aclient)
        return resolve_client(self.url, client)

    def server_now(self) -> float:
        """The Redis server's time (read once, then carried on the monotonic clock)."""
        offset = self._offset
        if offset is None or time.monotonic() - offset[1] > CLOCK_REFRESH:
            server = self._store(self.queue)[0].server_time()
            offset = self._offset = (server - time.monotonic(), time.monotonic())
        return time.monotonic() + offset[0]

    def _enqueue(self, call: Call[Any, Any], calls: Iterable[Any]) -> list[Result[Any]]:
        hooks = self.hooks.enqueueing(call.queue, call.task.name)
        if hooks is None:
            return self._write(call, calls, None)
        try:
            results = self._write(call, calls, hooks)
        except BaseException as exc:
            hooks.close(exc)
            raise
        hooks.close(None)
        return results

    def _write(
        self, call: Call[Any, Any], calls: Iterable[Any], hooks: EnqueueRun | None
    ) -> list[Result[Any]]:
        clock = self.server_now if self.eager is None else time.time
        mint = None if self.eager is not None else self.sharding.minter(call.queue)
        batch = enqueuer.Batch(call, list(calls), clock, hooks, mint)
        if self.eager is not None:
            return self.eager(batch)
        plan = self.sharding.plan(call.queue)
        if plan is None:
            return enqueuer.write(*self._store(call.queue), batch)
        parts = [(self._store(name)[0], where) for name, where in parts_of(batch, plan)]
        return enqueuer.write_parts(parts, self._store(plan.queues[0])[1], batch)

    async def _aenqueue(self, call: Call[Any, Any], calls: Iterable[Any]) -> list[Result[Any]]:
        hooks = self.hooks.enqueueing(call.queue, call.task.name)
        try:
            results = await self._awrite(call, list(calls), hooks)
        except BaseException as exc:
            if hooks is not None:
                hooks.close(exc)
            raise
        if hooks is not None:
            hooks.close(None)
        return results

    async def _awrite(self, call: Call[Any, Any], calls: list[Any],
                      hooks: EnqueueRun | None) -> list[Result[Any]]:  # fmt: skip
        """``_write`` awaited: a sharded queue's jobs routed as there (gq/tasks/sharding.py)."""
        if self.eager is not None:
            return self.eager(enqueuer.Batch(call, calls, time.time, hooks))
        plan = await self.sharding.aplan(call.queue, self._async_client())
        batch = enqueuer.Batch(call, calls, time.time, hooks, self.sharding.minter(call.queue))
        core = self._store_core(call)
        if plan is None:
            return await enqueuer.awrite(self._astore(call.queue), core, batch)
        parts = [(self._astore(name), where) for name, where in parts_of(batch, plan)]
        return await enqueuer.awrite_parts(parts, core, batch)

    def _store_core(self, call: Call[Any, Any]) -> ProducerCore:
        return ProducerCore(call.queue, self.max_message_bytes)

    def _astore(self, queue: str) -> AsyncRedisQueue:
        store = self._astores.get(queue)
        if store is None:
            from gq.store.aio import AsyncRedisQueue

            store = self._astores[queue] = AsyncRedisQueue(self._async_client(), queue)
        return store

    def _async_client(self) -> Any:
        if self._aclient is None and self.url is None:
            raise ConfigurationError(
                "aenqueue needs gq.App(url=...) or aclient= (a redis.asyncio client)"
            )
        if self._aclient is None:
            from gq.aio import client_from_url

            self._aclient = client_from_url(self.url)
        return self._aclient

    # -- results (SPEC section 16) -----------------------------------------------------

    def result(self, job_id: str, queue: str | None = None) -> Result[Any]:
        """A Result rebuilt from an id (a status endpoint): of ``queue`` when given (a
        shortcut), else of the first of ``known_queues()`` that knows the id (two round
        trips, gq.store.locate), else of the app's default queue, whose ``get()`` then
        says gq knows nothing of it."""
        if queue is not None:
            return Result(job_id, self.sharding.physical(queue, job_id), "", app=self)
        found = self.locate(job_id) or self.sharding.physical(self.queue, job_id)
        return Result(job_id, found, "", app=self)

    async def aresult(self, job_id: str, queue: str | None = None) -> Result[Any]:
        """``result`` from asyncio code (its look for the id's queue runs off the loop)."""
        return await off_loop(lambda: self.result(job_id, queue))

    def workflow(self, workflow_id: str) -> Any:
        """A chain's or group's handle rebuilt from its id (``ChainResult`` or
        ``GroupResult``); ``ResultUnavailable`` when no queue of the app knows it."""
        from gq.tasks.workflows import rebuilt

        return rebuilt(self, workflow_id)

    def known_queues(self) -> list[str]:
        """The queues a job of this app may be on: the default one first, then those its
        tasks and raw handlers name, then those it enqueued to (``using(queue=...)``)."""
        return list(dict.fromkeys([self.queue, *self.queues, *self.enqueued_queues()]))

    def locate(self, job_id: str) -> str | None:
        """The first of ``known_queues()`` that holds ``job_id`` or its outcome, else None."""
        queues = self.known_queues()
        if len(queues) == 1 and queues[0] not in self.sharding.counts:
            return queues[0]
        return self.sharding.locate(self._store(self.queue)[0].client, job_id, queues)

    def gather_results(self, spec: Mapping[str, Any]) -> list[Any]:
        """A group callback's first argument: its members' results, in order."""
        return gathered(self._store(spec["queue"])[0], spec["group"], int(spec["n"]))

    def __repr__(self) -> str:
        return f"<gq.App queues={','.join(self.queues)} tasks={len(self.tasks)}>"


def _refuse_main(task_name: str) -> None:
    # A worker imports the app's module, never the script: "__main__.x" is unknown there
    # and every job of it would be retried as an unknown task.
    if task_name.startswith("__main__."):
        raise ConfigurationError(
            f"task {task_name!r} is defined in a script run as __main__, which a worker "
            "cannot import: move the task into a module the worker imports, or give it "
            "name=... (@app.task(name='x'))"
        )
