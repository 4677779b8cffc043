"""The envelope: the ``Data`` of a task job (SPEC section 14, docs/wire.md).

A task job is an ordinary curlyq message whose ``Data`` is the 4 bytes ``\\x00gqt``
followed by one MessagePack map::

    task     str              the task's name                           (required)
    args     array            positional arguments                      (required)
    kwargs   map str -> any   keyword arguments                         (required)
    opts     map str -> any   the options gq enforces at the worker     (optional)
    headers  map str -> str   free metadata (trace ids, tenant, ...)    (optional)

The keys of ``opts`` (each optional; a reader ignores keys it does not know, so that a
newer producer can add some): ``retries`` (int >= 0: runs after the first),
``timeout`` (float seconds), ``backoff`` (float seconds: the cap of the retry delay),
``expires`` (float, absolute unix seconds: not started by then, the job goes to dead),
``unique`` (str: the uniqueness lock the job releases when it finishes),
``result_ttl`` (float seconds) and ``group`` (str). Everything a task needs lives in
``Data`` because curlyq rewrites a message from its own three fields when it retries
or kills a job.

Values: None, bool, int (64 bits), float, str, bytes (and bytearray, read back as
bytes), lists and tuples (read back as lists), dicts with str keys, and timezone-aware
datetimes (MessagePack's timestamp extension, -1; read back in UTC). Subclasses of
str, int and float (enums, say) travel as their base type, a str subclass as a map's
key too. Anything else is refused
with a ``TypeError`` naming its place (``kwargs["when"]``): UUID, Decimal, date, sets
and dataclasses are the caller's to convert (``str(uuid)``, ``date.isoformat()``,
``dataclasses.asdict(obj)``), so that every language reads the same values (no Python-only format).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgpack

from gq.errors import EnvelopeError

MAGIC = b"\x00gqt"
_MAGIC_LEN = len(MAGIC)
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
# Checked by type alone; an int out of 64 bits is left to msgpack (OverflowError), then
# located by _locate.
_SCALARS = frozenset({type(None), bool, int, str, bytes, float})
_packb = msgpack.packb
_unpackb = msgpack.unpackb
T = TypeVar("T")


class Envelope:
    """A decoded envelope: ``task``, ``args``, ``kwargs``, ``opts``, ``headers``."""

    __slots__ = ("task", "args", "kwargs", "opts", "headers")

    def __init__(
        self,
        task: str,
        args: list[Any],
        kwargs: dict[str, Any],
        opts: dict[str, Any],
        headers: dict[str, str],
    ) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.opts = opts
        self.headers = headers

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Envelope):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return "Envelope(task={!r}, args={!r}, kwargs={!r}, opts={!r}, headers={!r})".format(
            *self._fields()
        )

    def _fields(self) -> tuple[Any, ...]:
        return (self.task, self.args, self.kwargs, self.opts, self.headers)


def is_envelope(data: bytes) -> bool:
    """Whether a job's Data is a task envelope (starts with ``MAGIC``)."""
    return data[:_MAGIC_LEN] == MAGIC


def encode(
    task: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    opts: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The envelope for one call; ``TypeError`` naming the place of a value that has no
    MessagePack form (nothing is written then)."""
    if type(task) is not str or not task:
        raise TypeError(f"a task name is a non-empty str, not {task!r}")
    if not _ok_list(args) or not _ok_map(kwargs):
        _refuse(args, kwargs)
    body: dict[str, Any] = {"task": task, "args": args, "kwargs": kwargs}
    if opts:
        if not _ok_map(opts):
            _locate(dict(opts), "opts")
        body["opts"] = opts
    if headers:
        _check_headers(headers)
        body["headers"] = headers
    try:
        return MAGIC + _packb(body, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError) as exc:
        _refuse(args, kwargs)
        _locate(dict(opts or {}), "opts")
        raise TypeError(f"task {task}: a value has no MessagePack form: {exc}") from exc


#: ``fields()``'s answer: (task, args, kwargs, opts, headers).
Fields = tuple[str, list[Any], dict[str, Any], dict[str, Any], dict[str, str]]


def decode(data: bytes) -> Envelope:
    """Read an envelope; ``EnvelopeError`` saying what is wrong for anything malformed."""
    return Envelope(*fields(data))


def fields(data: bytes) -> Fields:
    """``decode()``'s values as one tuple, (task, args, kwargs, opts, headers): what a
    worker reads for every job it runs, with no object built per job (a slotted
    Envelope's ``__init__`` cost as much as the MessagePack read itself)."""
    if data[:_MAGIC_LEN] != MAGIC:
        raise EnvelopeError("not a task envelope (no \\x00gqt prefix)")
    try:
        body = _unpackb(data[_MAGIC_LEN:], raw=False, timestamp=3, ext_hook=_refuse_ext)
    except EnvelopeError:
        raise
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise EnvelopeError(f"the envelope is not MessagePack: {exc}") from exc
    if type(body) is not dict:
        raise EnvelopeError(f"the envelope is a {type(body).__name__}, not a map")
    if len(body) == 3:  # the shape a plain enqueue writes (no opts, no headers)
        task, args, kwargs = body.get("task"), body.get("args"), body.get("kwargs")
        if type(args) is list and type(kwargs) is dict and type(task) is str and task:
            return (task, args, kwargs, {}, {})
    get = body.get
    return _checked(get("task"), get("args"), get("kwargs"), get("opts") or {},
                    get("headers") or {})  # fmt: skip


#: How a plain call's envelope ends (``encode`` writes the keys in order): kwargs, empty.
_NO_KWARGS = b"\xa6kwargs\x80"
_NAME_AT = _MAGIC_LEN + 6  # the task name's header: after the map's header and "task"
_PREFIX_LEN = _NAME_AT + 6 - 0xA0  # plain_prefix's length, less a short name's header


def plain_prefix(task: str, keeps: bool = False) -> bytes:
    """How the envelope of every plain call of ``task`` starts, up to its args: a call
    without keyword arguments, options or headers, as ``encode(task, args, {})`` writes it;
    with ``keeps``, one that carries options (a map of four: ``own_call``)."""
    name: bytes = _packb(task)
    return MAGIC + (b"\x84" if keeps else b"\x83") + b"\xa4task" + name + b"\xa4args"


def own_suffix(opts: Mapping[str, Any]) -> bytes:
    """How the envelope of a call without keyword arguments or headers whose options are
    ``opts`` ends, as ``encode`` writes it: kwargs ``{}``, then the opts (if any)."""
    if not opts:
        return _NO_KWARGS
    return _NO_KWARGS + b"\xa4opts" + _packb(dict(opts), use_bin_type=True)  # type: ignore[no-any-return]


def own_call(
    data: bytes, known: Mapping[bytes, tuple[bytes, T]]
) -> tuple[T, list[Any], bytes] | None:
    """``(value, args, raw)`` for the envelope of a call that carries exactly the options
    one entry of ``known`` names, read with one MessagePack read of its args alone:
    ``known`` maps ``plain_prefix(task, keeps=bool(opts))`` to ``(own_suffix(opts), value)``;
    ``raw`` is the args' own bytes (one MessagePack array, read as ``args``), which a kept
    result's record reuses as they are (gq.tasks.outcome.OwnFinisher). None for any other call
    (``fields`` reads it, and says what is wrong).

    Exact, not a guess: the prefix (the map's size, the task, "args"), then one whole
    array and nothing else, then the suffix's bytes, is that map read in order, the shape
    ``fields`` answers ``(task, args, {}, opts, {})`` for. Per job it saves the map, its
    keys, the name, the kwargs and the opts built and dropped."""
    try:
        end = data[_NAME_AT] + _PREFIX_LEN  # right when the name is a fixstr (< 32 bytes)
        found = known.get(data[:end])
        if found is None or not data.endswith(found[0]):
            return None
        raw = data[end : -len(found[0])]
        args = _unpackb(raw, raw=False, timestamp=3, ext_hook=_refuse_ext)
    except Exception:  # noqa: BLE001 - anything unusual: fields() says what is wrong
        return None
    return (found[1], args, raw) if type(args) is list else None


def _checked(task: Any, args: Any, kwargs: Any, opts: Any, headers: Any) -> Fields:
    if type(task) is not str or not task:
        raise EnvelopeError(f"the envelope's task is {task!r}, not a non-empty str")
    if type(args) is not list:
        raise EnvelopeError(f"task {task}: args is {type(args).__name__}, not an array")
    if type(kwargs) is not dict:
        raise EnvelopeError(f"task {task}: kwargs is {type(kwargs).__name__}, not a map")
    if type(opts) is not dict:
        raise EnvelopeError(f"task {task}: opts is {type(opts).__name__}, not a map")
    if type(headers) is not dict or not all(type(v) is str for v in headers.values()):
        raise EnvelopeError(f"task {task}: headers is not a map of str to str")
    return (task, args, kwargs, opts, headers)


def _refuse_ext(code: int, data: bytes) -> Any:
    raise EnvelopeError(f"MessagePack extension type {code} is not a value gq reads")


def encodable(value: Any) -> bool:
    """Whether ``value`` has a MessagePack form (an argument or a return value)."""
    return _ok(value)


def _ok(value: Any) -> bool:
    """The fast check: True when ``value`` has a MessagePack form (no places tracked)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is list or kind is tuple:
        return _ok_list(value)
    if kind is dict:
        return _ok_map(value)
    if kind is _dt.datetime:
        return value.utcoffset() is not None
    return _problem(value) is None


def _ok_list(values: Any) -> bool:
    if type(values) is not list and type(values) is not tuple:
        return False
    # Loops, not all(...) over a generator: this runs for every argument of every enqueue.
    # The type test inline: most arguments are scalars, and a call each would double the cost.
    scalars = _SCALARS
    for value in values:  # noqa: SIM110
        if type(value) not in scalars and not _ok(value):
            return False
    return True


def _ok_map(values: Any) -> bool:
    # type() first: isinstance against the Mapping ABC costs a third of an empty map's check.
    if type(values) is not dict and not isinstance(values, Mapping):
        return False
    scalars = _SCALARS
    for key, value in values.items():
        if type(key) is not str and not isinstance(key, str):  # (a str enum: its str value)
            return False
        if type(value) not in scalars and not _ok(value):
            return False
    return True


def _problem(value: Any) -> str | None:
    """Why a leaf value has no MessagePack form (None when it has one)."""
    if isinstance(value, (bool, str, bytes, bytearray, float)) or value is None:
        return None
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return None
        return f"the int {value} does not fit in 64 bits"
    if isinstance(value, _dt.datetime):
        if value.utcoffset() is not None:
            return None
        return "a naive datetime (give it a tzinfo, e.g. datetime.timezone.utc)"
    hint = _HINTS.get(type(value).__name__, "")
    return f"a {type(value).__name__}, which has no MessagePack form{hint}"


_HINTS = {
    "UUID": "; pass str(value)",
    "Decimal": "; pass str(value)",
    "date": "; pass value.isoformat()",
    "time": "; pass value.isoformat()",
    "set": "; pass a list",
    "frozenset": "; pass a list",
}


def _refuse(args: Any, kwargs: Any) -> None:
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args is a {type(args).__name__}, not a list or a tuple")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs is a {type(kwargs).__name__}, not a mapping")
    _locate(args, "args")
    _locate(kwargs, "kwargs")


def _locate(value: Any, place: str) -> None:
    """Raise the TypeError naming the first value under ``place`` that has no form."""
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _locate(item, f"{place}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{place} has the key {key!r}: map keys must be str")
            _locate(item, f"{place}[{json.dumps(key)}]")
        return
    problem = _problem(value)
    if problem is not None:
        raise TypeError(f"{place} is {problem}")


def _check_headers(headers: Mapping[str, str]) -> None:
    for key, value in headers.items():
        if type(key) is not str or type(value) is not str:
            raise TypeError(f"headers[{key!r}] = {value!r}: headers map str to str")
