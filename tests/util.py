"""Small helpers shared by the tests: free ports and waiting on conditions.

They are ``shoal.testing``'s, which the benches use too.
"""

from __future__ import annotations

from shoal.system.components import NAMES
from shoal.testing.launch import free_port, free_ports
from shoal.testing.wait import wait_for

__all__ = ["free_port", "free_ports", "up_port", "wait_for"]


def up_port() -> int:
    """A port for ``shoal up --port``: its API there, each component's metrics on the next
    ones (``shoal.system.metrics_ports``), all of them free."""
    return free_ports(1 + len(NAMES))
