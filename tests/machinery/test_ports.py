"""Ports for servers told their port: below the kernel's ephemeral range, free when given."""

from __future__ import annotations

import socket
from pathlib import Path

from shoal.machinery.ports import _ephemeral_low, free_ports, listenable
from shoal.sim.cli import write_admin_url
from shoal.system.demo import previous_port


def test_a_run_of_free_ports_lies_below_the_ephemeral_range() -> None:
    first = free_ports(5)
    assert 10_000 <= first and first + 5 <= _ephemeral_low()
    assert all(listenable(port) for port in range(first, first + 5))


def test_a_port_a_server_listens_on_is_not_listenable() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert not listenable(server.getsockname()[1])


def test_shoal_up_keeps_its_simulators_port_while_it_is_free(tmp_path: Path) -> None:
    fresh = previous_port(tmp_path)  # no earlier run: a new port, below the ephemeral range
    assert fresh < _ephemeral_low() and listenable(fresh)
    write_admin_url(tmp_path, f"http://127.0.0.1:{fresh}")
    assert previous_port(tmp_path) == fresh
    with socket.socket() as other:  # taken since: another one
        other.bind(("127.0.0.1", fresh))
        other.listen()
        again = previous_port(tmp_path)
        assert again != fresh and again < _ephemeral_low()
