"""Where ``shoal up``'s component processes serve their own ``/metrics``.

Each process has its own Prometheus registry, so the scheduler and each
controller serve theirs on a port of their own (``--metrics-port``): one
first port and the next ones, in a fixed order, so a Prometheus configuration
written once keeps finding them from run to run.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.machinery.ports import listenable


def metrics_ports(first: int, names: Sequence[str]) -> dict[str, int | None]:
    """``names`` on ``first``, ``first + 1``... (none at all when ``first`` is 0).

    A port in use gives its component None (no metrics) rather than a process
    that cannot start and is restarted for ever.
    """
    if not first:
        return {}
    ports = {name: first + offset for offset, name in enumerate(names)}
    return {name: port if listenable(port) else None for name, port in ports.items()}


def metrics_args(ports: dict[str, int | None], name: str) -> list[str]:
    port = ports.get(name)
    return [] if port is None else ["--metrics-port", str(port)]


def describe(ports: dict[str, int | None], first: int) -> str:
    """One console line: each component's metrics URL, or that its port was taken."""
    return ", ".join(
        f"{name} http://127.0.0.1:{port}/metrics"
        if port is not None
        else f"{name} none (port {first + offset} in use)"
        for offset, (name, port) in enumerate(ports.items())
    )
