"""The Lua contract: every script loads on a real Redis, returns what its header says, and
follows the Lua 5.1 hygiene rules (SPEC section 6)."""

import re
from importlib import resources

import pytest
import redis

import gq
from gq import scripts
from gq.store import bulk
from gq.store.base import MAX_BATCH, is_refusal
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests import queue_state as state

SCRIPT_DIR = resources.files("gq.scripts")


def lua_files(folder):
    return {p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua")}


def test_the_script_files_are_exactly_the_scripts_the_code_loads():
    assert lua_files(SCRIPT_DIR) == set(scripts.NAMES)


def test_every_included_library_exists_and_every_library_is_used():
    used = set()
    for name in scripts.NAMES:
        match = re.search(
            r"^-- include: *(.+)$", SCRIPT_DIR.joinpath(f"{name}.lua").read_text(), re.M
        )
        used |= {part.strip() for part in match.group(1).split(",")} if match else set()
    assert used == lua_files(SCRIPT_DIR.joinpath("lib"))


@pytest.mark.parametrize("name", scripts.NAMES)
def test_every_script_documents_its_keys_arguments_and_return(name):
    header = scripts.header(name)
    assert "KEYS[1]" in header
    assert "ARGV" in header
    assert "Returns" in header


@pytest.mark.parametrize("name", scripts.NAMES)
def test_every_script_loads_on_a_real_redis(redis_server, name):
    client = redis_server.client()
    sha = client.script_load(scripts.source(name))
    assert client.script_exists(sha) == [True]


@pytest.mark.parametrize("name", scripts.NAMES)
def test_lua_51_hygiene(name):
    source = scripts.source(name)
    assert "table.getn" not in source
    # Every unpack is of a bounded slice: either (list, from, to) or the dead-set trim batch.
    # (cmsgpack.unpack decodes one MessagePack array into one table: no stack of values.)
    for call in re.findall(r"(?<!cmsgpack\.)unpack\(([^()]*)\)", source):
        assert call.count(",") == 2 or call == "ids", f"unbounded unpack({call}) in {name}"
    code = re.sub(r"--[^\n]*", "", source)
    # Every key is declared: KEYS is only ever indexed, and no key name is built in Lua.
    # (lib/events.lua's keys are the last two, lib/history.lua's the two before them)
    undeclared = re.sub(r"KEYS\[(\d+|k|#KEYS|#KEYS - [1-3])\]|#KEYS", "", code)
    assert not re.search(r"\bKEYS\b", undeclared), name  # (HKEYS is a command)
    # (announce_due's channel is no key: Cluster routes no PUBLISH by slot)
    code = code.replace("scheduled_key .. ':due'", "")
    assert not re.search(r"\.\.\s*'[:{]", code), f"{name} builds a key name"


# Each case runs one script through RedisQueue on a small state and checks the documented
# return; together they cover every script in NAMES.
def _cases():
    def push(q, c):
        assert q.push([("a", gq.job.encode(gq.Job("a"))), ("a", b"x")]) == [True, False]

    def schedule(q, c):
        assert q.schedule([("s", b"m", 5.0)], relative=True) == [True]

    def register(q, c):
        now = q.register("c1")
        assert isinstance(now, float) and abs(now - state.server_time(c)) < 5

    def deregister(q, c):
        q.register("c1")
        c.sadd(q.keys.inflight("c1"), "busy")
        assert q.deregister("c1") is False
        c.delete(q.keys.inflight("c1"))
        assert q.deregister("c1") is True

    def fetch(q, c):
        q.push([("a", b"m1")])
        c.rpush(q.keys.active, "no-message")
        q.register("c1")
        assert q.fetch("c1", 0) == []  # LRANGE 0 -1 would have taken the whole list
        assert q.fetch("c1", 5) == [("a", b"m1"), ("no-message", None)]

    def fetch_suspect(q, c):
        # A job recovered twice in a row comes alone, and only to an idle consumer; a job
        # recovered once ("o") is fetched like any other.
        q.push([(i, b"m-" + i.encode()) for i in ("o", "a", "b", "s", "c")])
        c.hset(q.keys.recovered, mapping={"o": 1, "s": 2})
        q.register("c1")
        once = q.fetch("c1", 1, idle=False)
        assert once == [("o", b"m-o")] and not once.suspect
        first = q.fetch("c1", 10, idle=False)
        assert first == [("a", b"m-a"), ("b", b"m-b")] and not first.suspect  # cut before s
        assert state.signal(c, q.keys.name) == [b"1"]  # jobs are left: the signal stays
        waiting = q.fetch("c1", 10, idle=False)
        assert waiting == [] and waiting.suspect
        assert state.active(c, q.keys.name) == ["s", "c"]  # nothing taken
        alone = q.fetch("c1", 10, idle=True)
        assert alone == [("s", b"m-s")] and alone.suspect
        rest = q.fetch("c1", 10, idle=False)
        assert rest == [("c", b"m-c")] and not rest.suspect
        assert state.signal(c, q.keys.name) == []

    def fetch_unregistered(q, c):
        with pytest.raises(redis.ResponseError, match="GQNOTREGISTERED"):
            q.fetch("nobody", 1)

    def ack(q, c):
        c.sadd(q.keys.inflight("c1"), "a")
        assert q.ack("c1", ["a", "b"]) == [True, False]

    def retry(q, c):
        c.sadd(q.keys.inflight("c1"), "a")
        assert q.retry("c1", "a", b"m", 1.0) is True
        assert q.retry("c1", "a", b"m", 1.0) is False

    def kill(q, c):
        c.sadd(q.keys.inflight("c1"), "a")
        assert q.kill("c1", "a", b"m", dead_max_jobs=10, dead_max_age=100.0) is True
        assert q.kill("c1", "a", b"m", dead_max_jobs=10, dead_max_age=100.0) is False

    def enqueue_due(q, c):
        c.zadd(q.keys.scheduled, {"due": 1.0, "later": 4e9})
        assert q.enqueue_due(10) == 1

    def requeue(q, c):
        c.sadd(q.keys.inflight("c1"), "a", "b")
        assert q.requeue("c1", ["a", "b", "c"]) == 2
        assert state.active(c, q.keys.name) == ["a", "b"]

    def expired_and_recover(q, c):
        c.zadd(q.keys.consumers, {q.keys.inflight("old"): 1.0})
        c.sadd(q.keys.inflight("old"), "a")
        c.hset(q.keys.data, "a", b"m")
        expired = q.expired_consumers(60.0, 10)
        assert expired == [q.keys.inflight("old")]
        assert (
            q.recover(
                "c1",
                expired,
                timeout=60.0,
                max_jobs=10,
                max_recoveries=3,
                dead_max_jobs=10,
                dead_max_age=100.0,
            )
            == 1
        )

    def purge(q, c):
        c.hset(q.keys.data, mapping={"a": b"m", "s": b"m"})
        c.rpush(q.keys.active, "a")
        c.zadd(q.keys.scheduled, {"s": 5.0})
        picks = [("ready", "a", "", None), ("scheduled", "s", "", None), ("dead", "x", "", None)]
        assert bulk.purge(q, (0, 1), picks) == [1, 1, 0]

    def move(q, c):
        c.hset(q.keys.data, "a", b"m")
        c.zadd(q.keys.dead, {"a": 5.0})
        c.hset(q.keys.data, "b", b"m")
        c.rpush(q.keys.active, "b")
        c.hset(q.keys.name + "-t:data", "b", b"other")
        picks = [("dead", "a", "", None), ("ready", "b", "", None), ("ready", "z", "", None)]
        assert bulk.move(q, q.keys.name + "-t", (0, 1), picks) == [1, -1, 0]
        c.delete(q.keys.name + "-t:data", q.keys.name + "-t:dead")

    def move_in(q, c):
        c.hset(q.keys.data, mapping={"b": b"m", "c": b"other"})
        copies = [("dead", "a", b"m", 5.0, ""), ("ready", "b", b"m", None, ""),
                  ("ready", "c", b"m", None, "")]  # fmt: skip
        assert bulk.move_in(q, copies) == [1, 2, -1]

    def reschedule(q, c):
        c.zadd(q.keys.scheduled, {"s": 5.0})
        assert bulk.reschedule(q, ["s", "x"], 60, relative=True) == [True, False]

    return [
        purge,
        move,
        move_in,
        reschedule,
        push,
        schedule,
        register,
        deregister,
        fetch,
        fetch_suspect,
        fetch_unregistered,
        ack,
        retry,
        kill,
        enqueue_due,
        requeue,
        expired_and_recover,
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda f: f.__name__)
def test_every_script_returns_what_its_header_says(backend, case):
    case(RedisQueue(backend.client(), backend.queue), backend.direct())


def test_scripts_reload_themselves_after_the_script_cache_is_flushed(backend):
    # What a Redis restart or failover does to the cache; redis-py's Script reloads on NOSCRIPT.
    queue = RedisQueue(backend.client(), backend.queue)
    queue.push([("a", b"m")])
    backend.direct().script_flush()
    queue.push([("b", b"m")])
    queue.register("c1")
    assert [job_id for job_id, _ in queue.fetch("c1", 10)] == ["a", "b"]


def flush_after(call, direct, times):
    """``call``, then SCRIPT FLUSH on ``direct`` (the first ``times`` calls only): a restart
    or a second SCRIPT FLUSH landing just after redis-py loaded a script."""
    left = [times]

    def flushing(*args, **kwargs):
        reply = call(*args, **kwargs)
        if left[0] > 0:
            left[0] -= 1
            direct.script_flush()
        return reply

    return flushing


def test_a_call_is_sent_again_when_the_cache_is_flushed_right_after_its_reload(backend):
    # redis-py reloads once on NOSCRIPT; a flush just after that reload had failed the call
    # (and a worker's ack with it, issue 22's CI run: test_5_script_flush_mid_run).
    client, direct = backend.client(), backend.direct()
    queue = RedisQueue(client, backend.queue)
    queue.push([("a", b"m")])
    queue.register("c1")
    client.script_load = flush_after(client.script_load, direct, times=1)
    direct.script_flush()
    assert [job_id for job_id, _ in queue.fetch("c1", 10)] == ["a"]
    assert queue.ack("c1", ["a"]) == [True]


def test_a_pipelined_call_that_met_a_flush_goes_again_alone_and_no_call_runs_twice(backend):
    client, direct = backend.client(), backend.direct()
    queue = RedisQueue(client, backend.queue)
    ids = [f"j{i}" for i in range(2 * MAX_BATCH + 1)]  # three ack calls in one pipeline
    queue.push([(job_id, b"m") for job_id in ids])
    queue.register("c1")
    fetched = [job_id for _ in range(3) for job_id, _ in queue.fetch("c1", MAX_BATCH)]
    assert fetched == ids
    pipelines = []
    make_pipeline = client.pipeline

    def pipeline(**kwargs):
        pipe = make_pipeline(**kwargs)
        pipe.load_scripts = flush_after(pipe.load_scripts, direct, times=1)
        pipelines.append(pipe)
        return pipe

    client.pipeline = pipeline
    # True for every id: a batch that had run and were sent again would answer "not owned".
    assert queue.ack("c1", ids) == [True] * len(ids)
    assert pipelines and direct.scard(QueueKeys(backend.queue).inflight("c1")) == 0


def test_a_flushed_script_cache_is_no_refusal_so_workers_send_their_writes_again():
    assert not is_refusal(redis.exceptions.NoScriptError("No matching script."))
    assert is_refusal(redis.ResponseError("WRONGTYPE Operation against a key"))


@pytest.mark.timeout(120)
def test_large_batches_are_chunked_below_the_lua_unpack_limit(backend):
    # Lua 5.1 fails with "too many results to unpack" at about 8,000 values.
    queue = RedisQueue(backend.client(), backend.queue)
    direct = backend.direct()
    keys = QueueKeys(backend.queue)
    count = 10_000
    direct.zadd(keys.scheduled, {f"j{i}": 1.0 + i for i in range(count)})
    assert queue.enqueue_due(count) == count
    assert direct.llen(keys.active) == count
    assert direct.lrange(keys.active, 0, 1) == [b"j0", b"j1"]
    direct.zadd(keys.consumers, {keys.inflight("old"): 1.0})
    direct.sadd(keys.inflight("old"), *[f"r{i}" for i in range(count)])
    direct.hset(keys.data, mapping={f"r{i}": b"m" for i in range(count)})
    recovered = queue.recover(
        "c1",
        [keys.inflight("old")],
        timeout=60.0,
        max_jobs=count,
        max_recoveries=3,
        dead_max_jobs=10,
        dead_max_age=100.0,
    )
    assert recovered == count
    assert direct.llen(keys.active) == 2 * count
