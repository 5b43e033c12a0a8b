"""Guard work that needs the request body: batches answered per item, requesters stamped.

A batch (``/scheduling/bindings``, ``/kubernetes/applications``) is checked
item by item: the items the user may not touch get their own 403 result and
never reach the route; the others go through, and the answer is merged back
in the original order. A new RescheduleTask gets ``spec.requested_by``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from shoal.api.auth.authn import User
from shoal.api.auth.rbac import Grant
from shoal.machinery.asgi import Message, Receive, Send


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then whatever comes (a disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def stamp_requester(data: Any, user: User) -> dict[str, Any] | None:
    """A new RescheduleTask's body (as parsed at the door) with ``spec.requested_by`` set to
    ``user``; None when it has no spec (the route answers the malformed body)."""
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
        return None
    groups = [g for g in user.groups if not g.startswith("system:")]
    return {**data, "spec": {**data["spec"], "requested_by": {"user": user.name,
                                                               "groups": groups}}}


def _at(item: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in a batch item (None where the item has none)."""
    for key in path:
        item = item.get(key) if isinstance(item, dict) else None
    return item


def item_names(data: Any, field: str, namespace: tuple[str, ...]) -> list[str] | None:
    """``namespace/name`` of each item of a batch, for the audit log."""
    items = data.get(field) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    name = (*namespace[:-1], "name")
    return [
        f"{_at(item, namespace)}/{_at(item, name)}" if isinstance(item, dict) else "?"
        for item in items
    ]


def split_batch(
    data: Any,
    field: str,
    namespace_at: tuple[str, ...],
    grant: Grant,
    forbidden: Callable[[str], str],
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]] | None:
    """(the body with only the allowed items, the 403 results by position); None: as is.

    ``data`` is the body as parsed at the door, the value the route acts on. An item
    that names no namespace (at ``namespace_at``) is refused unless the user may act
    everywhere.
    """
    items = data.get(field) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    refused: dict[int, dict[str, Any]] = {}
    name_at = (*namespace_at[:-1], "name")
    for i, item in enumerate(items):
        namespace = _at(item, namespace_at)
        if not isinstance(namespace, str) or not grant.allows(namespace):
            refused[i] = {
                "namespace": namespace,
                "name": _at(item, name_at),
                "status": 403,
                "title": "FORBIDDEN",
                "detail": forbidden(namespace)
                if isinstance(namespace, str)
                else "an item must name its namespace (a string)",
            }
    if not refused:
        return None
    return {**data, field: [item for i, item in enumerate(items) if i not in refused]}, refused


def merged(refused: dict[int, dict[str, Any]], total: int, send: Send) -> Send:
    """A send that puts the refused items' results back among the route's, in order."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def send_merged(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        assert start is not None
        body = b"".join(chunks)
        data = _json(body) if start["status"] == 200 else None
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            passed = iter(data["results"])
            data["results"] = [refused[i] if i in refused else next(passed) for i in range(total)]
            body = orjson.dumps(data)
        headers = [(k, v) for k, v in start.get("headers", ()) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return send_merged


def all_refused(refused: dict[int, dict[str, Any]]) -> bytes:
    return orjson.dumps({"results": [refused[i] for i in sorted(refused)]})
