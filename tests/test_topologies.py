"""The test deployments themselves: a port taken between free_port() and the server's bind
(CI's run of 0614de7 lost the whole cluster module to one) costs a restart, not the tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import topologies
from tests.helpers import free_port

pytestmark = pytest.mark.real_redis


@pytest.fixture
def taken_first(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """free_port() answers a port something holds (bound, as an outgoing connection's
    local port is), then free ones."""
    with socket.socket() as holder:
        holder.bind((topologies.HOST, 0))
        port = int(holder.getsockname()[1])
        answers = iter([port])
        monkeypatch.setattr(topologies, "free_port", lambda: next(answers, None) or free_port())
        yield port


def test_a_node_whose_port_was_taken_starts_again_on_another(taken_first: int, tmp_path: Path):
    node = topologies.start_node(tmp_path, [])
    try:
        assert node.port != taken_first
        with node.client() as client:
            assert client.ping()
    finally:
        node.stop()


def test_a_cluster_node_whose_bus_port_was_taken_starts_again(taken_first: int, tmp_path: Path):
    node = topologies.start_node(tmp_path, ["--cluster-enabled", "yes"], bus=True)
    try:
        with node.client() as client:
            assert client.ping() and client.info("cluster")["cluster_enabled"] == 1
    finally:
        node.stop()
