"""A kind's watch as a route answers it: the store's events from a revision, filtered by the
reader's namespaces and selectors, streamed as NDJSON with heartbeats.

Selectors are checked before the store's watch starts, so a refused watch (400) leaves
nothing behind; a compacted revision is a 410 before streaming.
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

from shoal.api.auth.context import VISIBLE_NAMESPACE
from shoal.api.codec import with_revision
from shoal.api.field_selector import parse_field_selector
from shoal.api.listing import namespace_of, parse_label_selector, refuse_secret_fields
from shoal.api.metrics import WATCHES
from shoal.api.resources import Resources
from shoal.machinery.selectors.fields import FieldSelector
from shoal.machinery.tasks import cancel_and_wait
from shoal.model.base import Kind
from shoal.store.base import Event, EventType


async def watch_response(
    res: Resources, kind: type[Kind], namespace: str | None, kw: dict[str, Any]
) -> Response:
    from_revision: int | None = kw["resource_version"]
    if from_revision is not None:
        await res.store.check_revision(from_revision)  # Compacted → 410 before streaming
    else:
        from_revision = await res.store.revision()
    prefix = kind.key_prefix(namespace)
    # Selectors are checked before the store watch starts: a 400 leaves no watch behind.
    parsed = parse_label_selector(kw["label_selector"])
    fields = parse_field_selector(kw["field_selector"])
    refuse_secret_fields(kind, fields)
    visible = VISIBLE_NAMESPACE.get()
    queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue(maxsize=10_000)
    start = from_revision

    async def pump() -> None:
        try:
            async for event in res.store.watch(prefix, start):
                await queue.put(event)
            await queue.put(None)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the stream must end, whatever the store says
            await queue.put(error)

    task = asyncio.create_task(pump())
    heartbeat: float = kw["heartbeat"]

    async def stream() -> AsyncIterator[bytes]:
        WATCHES.inc()
        try:
            while True:
                try:  # asyncio.timeout, not wait_for: no task made per wait
                    async with asyncio.timeout(heartbeat):
                        item = await queue.get()
                except TimeoutError:
                    yield b"\n"
                    continue
                if item is None or isinstance(item, BaseException):
                    return
                # With what is already queued, in one chunk: fewer, larger writes.
                chunk = [event_line(item, parsed, fields, visible)]
                while not queue.empty() and len(chunk) < 500:
                    more = queue.get_nowait()
                    if more is None or isinstance(more, BaseException):
                        yield b"".join(chunk)
                        return
                    chunk.append(event_line(more, parsed, fields, visible))
                yield b"".join(chunk)
        finally:
            WATCHES.dec()
            await cancel_and_wait([task])

    return StreamingResponse(stream(), media_type="application/x-ndjson")


def event_line(
    event: Event,
    selector: Any,
    fields: FieldSelector | None = None,
    visible: Callable[[str | None], bool] | None = None,
) -> bytes:
    if visible is not None and not visible(namespace_of(event.key)):
        return b""  # before the selectors: they never test what the reader may not see
    if selector is not None or fields is not None:
        data = orjson.loads(event.value)
        if selector is not None and not selector.matches(data["metadata"].get("labels") or {}):
            return b""
        if fields is not None and not fields.matches(data):
            return b""
    kind = event.type.value if isinstance(event.type, EventType) else str(event.type)
    return (
        b'{"type":"'
        + kind.encode()
        + b'","object":'
        + with_revision(event.value, event.revision)
        + b"}\n"
    )
