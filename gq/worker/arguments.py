"""What a Consumer is given, resolved: its options, its client, its queues and weights, and
the retry policy of each of its loops (SPEC section 2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Union

from gq.errors import ConfigurationError
from gq.options import ConsumerOptions
from gq.store.config import check_queue_name, resolve_client
from gq.store.shards import Layout, check_shards, layout

Queues = Union[str, Sequence[str], Mapping[str, int]]

# Connections of a pool gq builds: the poller's blocking wait, the acker, the maintenance
# loops, and room for failing jobs' retries; more callers wait their turn.
POOL_CONNECTIONS = 16

Read = Callable[[ConsumerOptions], float]

# Per loop family: how many failures in a row end the consumer (0: never), and the cap of
# the backoff between tries. Read at every failure, so a live opts change applies.
_POLICIES: dict[str, tuple[Read, Read]] = {
    "poller": (lambda o: o.poller_max_attempts or 0, lambda o: o.poller_max_backoff),
    # A failed heartbeat is tried again well within the lease, whatever the cap says:
    # waiting longer would let a custodian take this consumer for dead after one lost
    # reply, and its jobs would run twice.
    "heartbeat": (
        lambda o: o.heartbeat_max_attempts or 0,
        lambda o: min(o.heartbeat_max_backoff, o.custodian_consumer_timeout / 4),
    ),
    "scheduler": (lambda o: o.scheduler_max_attempts or 0, lambda o: o.scheduler_max_backoff),
    "custodian": (lambda o: o.custodian_max_attempts or 0, lambda o: o.custodian_max_backoff),
    # The due-time listener only wakes the scheduler sooner: it never ends the consumer, the
    # Scheduler loop (which polls the same server) does when Redis stays away.
    "wake": (lambda o: 0, lambda o: o.scheduler_max_backoff),
}


def retry_policy(
    opts: ConsumerOptions, family: str
) -> tuple[Callable[[], int], Callable[[], float]]:
    """A loop's ``max_attempts`` and ``max_backoff`` callables for ``family``'s options."""
    attempts, backoff = _POLICIES[family]
    return (lambda: int(attempts(opts))), (lambda: backoff(opts))


def consumer_options(given: ConsumerOptions | None, overrides: dict[str, Any]) -> ConsumerOptions:
    """``given`` (a copy: the caller's object stays theirs) with ``overrides`` applied, or
    the options the keywords name."""
    ConsumerOptions.check_names(overrides)
    if given is None:
        return ConsumerOptions(**overrides)
    if not isinstance(given, ConsumerOptions):
        raise ConfigurationError(
            f"options must be a gq.ConsumerOptions, not {type(given).__name__}"
        )
    return dataclasses.replace(given, **overrides)


def consumer_client(url: str | None, client: Any, opts: ConsumerOptions) -> Any:
    # The blocking wait for the signal lasts poller_poll_duration: reads may take that
    # long, and only a silence well beyond it means the connection is gone.
    return resolve_client(
        url,
        client,
        max_connections=POOL_CONNECTIONS,
        socket_timeout=opts.poller_poll_duration + 10.0,
        socket_connect_timeout=10.0,
    )


def queue_weights(queue: Queues) -> dict[str, int]:
    """Queue name -> weight, in the order given; a name alone weighs 1."""
    if isinstance(queue, str) or not isinstance(queue, (Mapping, Sequence)):
        return {check_queue_name(queue): 1}
    weights = _named_weights(queue)
    if not weights:
        raise ConfigurationError("no queue: name at least one")
    for name, weight in weights.items():
        check_queue_name(name)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            raise ConfigurationError(f"the weight of queue {name!r} must be an int >= 1")
    return weights


def expand_shards(
    weights: dict[str, int],
    shards: Mapping[str, int] | None,
    served: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, int], dict[str, str]]:
    """The physical queues to serve, with their weights (a sharded queue's shards each
    take its weight, in place of its name: those ``served`` lists, else its count's),
    and each shard's sharded queue."""
    counts = {name: check_shards(name, n) for name, n in (shards or {}).items()}
    physical: dict[str, int] = {}
    families: dict[str, str] = {}
    for name, weight in weights.items():
        if name not in counts:
            physical[name] = weight
            continue
        for shard in (served or {}).get(name) or layout(name, counts[name]).queues:
            physical[shard], families[shard] = weight, name
    return physical, families


def periodic_on_shards(entries: Iterable[Any], families: Mapping[str, str],
                       current: Mapping[str, Layout]) -> list[Any]:  # fmt: skip
    """Periodic entries (gq.Periodic) of a sharded queue kept and enqueued on the shard
    their schedule's name routes to (``current``'s layout of the queue, else the shards
    served): one cursor per schedule, so each occurrence is enqueued once, and the
    schedules spread over the shards (their ids route elsewhere: found by asking every
    shard)."""
    plans = {name: current.get(name) or Layout(name, tuple(
        shard for shard, family in families.items() if family == name))
        for name in set(families.values())}  # fmt: skip
    return [dataclasses.replace(entry, queue=plans[entry.queue].for_key(entry.name))
            if entry.queue in plans else entry for entry in entries]  # fmt: skip


def _named_weights(given: Sequence[str] | Mapping[str, int]) -> dict[str, int]:
    if isinstance(given, Mapping):
        return dict(given)
    if len(set(given)) != len(list(given)):
        raise ConfigurationError(f"a queue is named twice in {list(given)!r}")
    return dict.fromkeys(given, 1)


def require_monkey_patching() -> None:
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        raise ConfigurationError(
            "gq's Consumer needs a gevent monkey-patched process: call "
            "`from gevent import monkey; monkey.patch_all()` before any other import, "
            "or run your handler with the gq-worker command, which does it for you"
        )
