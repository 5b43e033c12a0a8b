"""Free TCP ports on the loopback address, for servers that are told their port.

A port the kernel hands out (``bind(0)``) lies in its ephemeral range, where any
outgoing connection of another process may take it between the probe and the
server's own bind; ``free_ports`` picks ports below that range instead.
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path


def listenable(port: int) -> bool:
    """Whether a server could listen on ``port`` of 127.0.0.1 now (``SO_REUSEADDR``, as
    Shoal's servers bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):
            probe.bind(("127.0.0.1", port))
            return True
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (from the kernel's ephemeral range:
    for a server that binds it at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1, all free right now.

    For a server started later, or one that listens on a run of ports, as ``shoal
    up`` does (its API on the first, each component's metrics on the next ones).
    They are taken below the kernel's ephemeral range, where no outgoing connection
    takes one before the server binds it.
    """
    rng = random.Random()
    low = _ephemeral_low()
    for _ in range(200):
        first = rng.randrange(10_000, low - count)
        if all(listenable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports below {low}")
