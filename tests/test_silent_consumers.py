"""``gq consumers`` during an incident (issue #15 section 3), run as a subprocess against
fakeredis (over TCP) and a real Redis: a consumer whose facts are overdue shows "silent
for N s" with its jobs "in flight, to be recovered at T", and its last reported counts."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.cli_support import ADMIN, env_for, run
from tests.helpers import RedisServer, delete_keys
from tests.silent_support import LEASE, LIVE, SILENT, SILENT_FOR, fake_server, one_live_one_silent

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["fake", "real"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(Redis URL, queue) with one live and one silent consumer registered."""
    queue = f"test_silent_{uuid.uuid4().hex[:8]}"
    if request.param == "fake":
        with fake_server() as url:
            one_live_one_silent(redis.Redis.from_url(url), queue)
            yield url, queue
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    one_live_one_silent(server.client(), queue)
    yield server.url, queue
    delete_keys(server.client(), f"{queue}*")


def test_gq_consumers_shows_a_silent_consumer_and_when_its_jobs_are_recovered(
    served: tuple[str, str],
) -> None:
    result = run(ADMIN, "consumers", env=env_for(*served))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # The facts as last reported, both ages 30 s and more (the command's start is seconds).
    cells = r"host-sile\s+4242\s+1\.0\s+97\s+1600\s+0\s+3\s+80M\s+80%\s+3\ds ago\s+3\ds ago\s+3"
    silent = rf"^{SILENT}\s+{cells}\s+silent: silent for 3\ds$"
    assert re.search(silent, out, re.M), out
    assert re.search(rf"^{LIVE}\s.*\s40\s+0\s+0\s.*\s0\s+alive$", out, re.M), out
    recovery = rf"^{SILENT}: 3 job\(s\) in flight, to be recovered at \S+ \S+ \(in 1m[0-3]\ds\)$"
    assert re.search(recovery, out, re.M), out


def test_gq_consumers_json_tells_silent_for_and_the_recovery_time(
    served: tuple[str, str],
) -> None:
    result = run(ADMIN, "consumers", "--json", env=env_for(*served))
    assert result.returncode == 0, result.stderr
    entries = {e["consumer"]: e for e in map(json.loads, result.stdout.splitlines())}
    silent, live = entries[SILENT], entries[LIVE]
    assert (silent["state"], silent["silent"], silent["alive"]) == ("silent", True, True)
    assert SILENT_FOR <= silent["silent_for"] < SILENT_FOR + 10
    assert silent["recover_at"] == pytest.approx(silent["last_heartbeat"] + LEASE)
    assert LEASE - SILENT_FOR - 10 < silent["recover_in"] <= LEASE - SILENT_FOR
    assert (silent["in_flight"], silent["running"], silent["jobs_done"]) == (3, 97, 1600)
    assert silent["updated_at"] == pytest.approx(silent["last_heartbeat"])
    assert (live["state"], live["silent"], live["in_flight"]) == ("alive", False, 0)


def test_gq_consumers_recover_hands_a_silent_consumers_jobs_back_now(
    served: tuple[str, str],
) -> None:
    result = run(ADMIN, "consumers", "--recover", SILENT, env=env_for(*served))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"recovered 3 job(s) of consumer {SILENT} on queue {served[1]}"
    listed = run(ADMIN, "consumers", "--json", env=env_for(*served)).stdout
    assert [json.loads(line)["consumer"] for line in listed.splitlines()] == [LIVE]


def test_gq_consumers_recover_refuses_a_live_consumer_unless_forced(
    served: tuple[str, str],
) -> None:
    refused = run(ADMIN, "consumers", "--recover", LIVE, env=env_for(*served))
    assert refused.returncode == 1
    assert f"consumer {LIVE} is alive" in refused.stderr and "--force" in refused.stderr
    forced = run(ADMIN, "consumers", "--recover", LIVE, "--force", env=env_for(*served))
    assert forced.returncode == 0, forced.stderr
    unknown = run(ADMIN, "consumers", "--recover", "nobody", env=env_for(*served))
    assert (unknown.returncode, unknown.stderr.strip()) == (
        1, f"gq: error: no consumer 'nobody' is registered on {served[1]}"
    )  # fmt: skip
