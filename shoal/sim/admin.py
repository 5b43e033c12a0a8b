"""The rules of the simulator's admin API: who may call it, which cluster options a new
cluster takes, and what a fault body means.

The routing of ``/admin`` stays with the server that holds the clusters (``server``).
"""

from __future__ import annotations

import hmac
from typing import Any

from shoal.sim.asgi import Request
from shoal.sim.cluster import SimCluster
from shoal.sim.store import ApiError


def flag(value: Any) -> bool:
    """A JSON boolean, strictly (a 422 for anything else)."""
    if not isinstance(value, bool):
        raise ApiError(422, "Invalid", f"must be true or false, not {value!r}"[:200])
    return value


# cluster options the admin API takes, and how each is read from the JSON body
ADMIN_OPTIONS: dict[str, Any] = {
    "cpu": str, "memory": str, "max_pods": int, "region": str,
    "pod_start_delay": float, "job_duration": float, "token": str, "system_pods": flag,
}


def authorise(req: Request, token: str) -> None:
    """The admin API answers only its token's holder (compared in constant time)."""
    scheme, _, given = req.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        return
    raise ApiError(401, "Unauthorized", "the simulator's admin API needs its token: "
                   "Authorization: Bearer TOKEN (shoal up keeps it in DATA_DIR/sim.token)")


async def fault(cluster: SimCluster, body: Any) -> None:
    """Set the faults a JSON body names on ``cluster`` (or on one of its nodes)."""
    if not isinstance(body, dict):
        raise ApiError(422, "Invalid", "a fault must be a JSON object")
    if "unreachable" in body:
        cluster.set_unreachable(bool(body["unreachable"]))
    if "reachable" in body:
        cluster.set_unreachable(not bool(body["reachable"]))
    if "latency" in body:
        seconds = body["latency"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ApiError(422, "Invalid", "latency: must be a number of seconds, 0 or more")
        cluster.fault_injector.latency = float(seconds)
    node = body.get("node")
    if node:
        def opt(key: str, inverse: str | None = None) -> bool | None:
            if key in body:
                return bool(body[key])
            if inverse and inverse in body:
                return not bool(body[inverse])
            return None

        try:
            cluster.set_node_fault(
                str(node),
                not_ready=opt("not_ready", "ready"),
                memory_pressure=opt("memory_pressure"),
                removed=opt("removed"),
            )
        except KeyError as exc:
            raise ApiError(404, "NotFound", f"no node {node!r} in {cluster.name}") from exc
