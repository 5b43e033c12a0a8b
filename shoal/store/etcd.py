"""The distributed store: etcd v3 over gRPC.

We use aetcd's generated gRPC stubs and messages (``aetcd.rpc``) but not its
high-level ``Client``: that client drops ``RangeRequest.limit`` (list paging
would read whole prefixes), and its watcher multiplexes every watch through
one stream with awaited callbacks and reports compaction only through a
shared error path. Talking to the stubs directly keeps one channel per
endpoint, one bidirectional stream per watch, and every etcd field in reach.

Revisions are etcd revisions: a record's revision is its ``mod_revision``, a
list returns the response header's revision. ``compact(r)`` keeps history
after ``r`` (a watch from ``r`` works, from ``r - 1`` raises Compacted); etcd
itself would still serve a watch starting at revision ``r``, so ``watch`` and
``check_revision`` probe with a range read at the requested revision, which
etcd refuses exactly when it is below the compaction point.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from aetcd import rpc

from shoal.store import base

T = TypeVar("T")

_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
# Errors raised before the request left the client: safe to retry even a write.
_NOT_SENT = ("failed to connect", "connection refused", "connections to all backends failing")
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"

_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", 512 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    # Notice a dead member under a long watch; etcd accepts pings every >= 5 s.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 0),
    # Fail fast and move to the next endpoint instead of backing off for long.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


def _key_bytes(key: str) -> bytes:
    return key.encode()


def _range_end(prefix: str) -> bytes:
    return base.prefix_end(prefix).encode() if prefix else b"\0"


def _not_sent(error: grpc.aio.AioRpcError) -> bool:
    details = (error.details() or "").lower()
    return error.code() is grpc.StatusCode.UNAVAILABLE and any(s in details for s in _NOT_SENT)


class _Endpoint:
    """One member's channel and stubs, created on first use and then reused."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel: grpc.aio.Channel | None = None
        self._kv: Any = None
        self._watch: Any = None

    def _open(self) -> None:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.target, options=_CHANNEL_OPTIONS)
            self._kv = rpc.KVStub(self._channel)
            self._watch = rpc.WatchStub(self._channel)

    @property
    def kv(self) -> Any:
        self._open()
        return self._kv

    @property
    def watch(self) -> Any:
        self._open()
        return self._watch

    async def close(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()


class EtcdStore:
    """Store protocol on an etcd v3 cluster (one or more client endpoints)."""

    def __init__(self, endpoints: list[str], *, timeout: float = 10.0) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self._endpoints = [_Endpoint(target) for target in endpoints]
        self._current = 0
        self._timeout = timeout

    @classmethod
    def from_url(cls, url: str, *, timeout: float = 10.0) -> EtcdStore:
        """``etcd://host:port[,host:port...]``; requests fail over between endpoints."""
        if not url.startswith("etcd://"):
            raise ValueError(f"not an etcd URL: {url!r}")
        rest = url[len("etcd://") :].split("/", 1)[0]
        endpoints = [e.strip() for e in rest.split(",") if e.strip()]
        if not endpoints:
            raise ValueError(f"no endpoints in {url!r}")
        return cls([e if ":" in e else f"{e}:2379" for e in endpoints], timeout=timeout)

    @property
    def endpoints(self) -> list[str]:
        return [e.target for e in self._endpoints]

    # transport -------------------------------------------------------------

    async def _call(self, make: Callable[[_Endpoint], Awaitable[T]], *, idempotent: bool) -> T:
        """Run one unary call, moving to the next endpoint on a connection failure.

        A write whose fate is unknown (sent, then the connection broke) is not
        retried: a blind retry could apply it twice. The caller gets base.Unavailable.
        """
        attempts = len(self._endpoints)
        start = self._current
        for attempt in range(attempts):
            # Each endpoint once, from the current one: calls failing side by side move
            # ``_current`` too, and following it could try a dead member every time.
            index = (start + attempt) % attempts
            endpoint = self._endpoints[index]
            try:
                result = await make(endpoint)
            except grpc.aio.AioRpcError as error:
                if error.code() not in _UNAVAILABLE:
                    raise base.StoreError(f"etcd {endpoint.target}: {error.details()}") from error
                if len(self._endpoints) > 1 and self._current == index:
                    self._current = (index + 1) % len(self._endpoints)
                retry = idempotent or _not_sent(error)
                if not retry or attempt == attempts - 1:
                    raise base.Unavailable(f"etcd {endpoint.target}: {error.details()}") from error
            else:
                self._current = index  # the member that answered serves the next calls
                return result
        raise AssertionError("unreachable")

    async def _range(self, request: Any) -> Any:
        return await self._call(
            lambda e: e.kv.Range(request, timeout=self._timeout), idempotent=True
        )

    async def _txn(self, request: Any) -> Any:
        return await self._call(
            lambda e: e.kv.Txn(request, timeout=self._timeout), idempotent=False
        )

    # reads -----------------------------------------------------------------

    async def get(self, key: str) -> base.Record:
        response = await self._range(rpc.RangeRequest(key=_key_bytes(key)))
        if not response.kvs:
            raise base.NotFound(key)
        kv = response.kvs[0]
        return base.Record(key, kv.value, kv.mod_revision)

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> tuple[list[base.Record], int]:
        start = _key_bytes(prefix)
        if start_after is not None and start_after >= prefix:
            start = _key_bytes(start_after) + b"\0"
        request = rpc.RangeRequest(
            key=start,
            range_end=_range_end(prefix),
            sort_order=rpc.RangeRequest.ASCEND,
            sort_target=rpc.RangeRequest.KEY,
            limit=limit or 0,
        )
        if limit is not None and limit <= 0:
            return [], await self.revision()
        response = await self._range(request)
        records = [base.Record(kv.key.decode(), kv.value, kv.mod_revision) for kv in response.kvs]
        return records, response.header.revision

    async def revision(self) -> int:
        response = await self._range(rpc.RangeRequest(key=b"\0", count_only=True))
        return int(response.header.revision)

    async def _compacted_revision(self) -> int:
        """etcd's compaction revision: a watch from revision 1 is refused with it."""
        call = self._endpoints[self._current].watch.Watch(timeout=self._timeout)
        try:
            create = rpc.WatchCreateRequest(key=b"\0", start_revision=1)
            await call.write(rpc.WatchRequest(create_request=create))
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    raise base.Unavailable("etcd closed the watch stream")
                if response.compact_revision:
                    return int(response.compact_revision)
                if response.canceled:
                    raise base.StoreError(f"etcd refused a watch: {response.cancel_reason}")
        except grpc.aio.AioRpcError as error:
            raise _map(error) from error
        finally:
            call.cancel()

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """Each write stays its own etcd transaction (etcd commits are already batched)."""
        yield

    async def check_revision(self, revision: int) -> None:
        # A range read at a revision below etcd's compaction point is refused;
        # one at the compaction point itself is served, exactly as we need.
        request = rpc.RangeRequest(key=b"\0", count_only=True, revision=max(revision, 1))
        try:
            await self._range(request)
        except base.StoreError as error:
            cause = error.__cause__
            if isinstance(cause, grpc.aio.AioRpcError):
                details = cause.details() or ""
                if _FUTURE in details:
                    return
                if _COMPACTED in details:
                    raise base.Compacted(revision, await self._compacted_revision()) from None
            raise

    # writes ----------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> int:
        k = _key_bytes(key)
        request = rpc.TxnRequest(
            compare=[
                rpc.Compare(
                    key=k,
                    target=rpc.Compare.CREATE,
                    result=rpc.Compare.EQUAL,
                    create_revision=0,
                )
            ],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
        )
        response = await self._txn(request)
        if not response.succeeded:
            raise base.AlreadyExists(key)
        return int(response.header.revision)

    @staticmethod
    def _guard(k: bytes, expected_revision: int | None) -> builtins.list[Any]:
        compare = [
            rpc.Compare(key=k, target=rpc.Compare.CREATE, result=rpc.Compare.GREATER,
                        create_revision=0)
        ]  # fmt: skip
        if expected_revision is not None:
            compare.append(
                rpc.Compare(key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL,
                            mod_revision=expected_revision)
            )  # fmt: skip
        return compare

    def _failed(self, key: str, expected_revision: int | None, response: Any) -> base.StoreError:
        kvs = response.responses[0].response_range.kvs if response.responses else []
        if not kvs:
            return base.NotFound(key)
        return base.Conflict(key, expected_revision or 0, int(kvs[0].mod_revision))

    async def update(self, key: str, value: bytes, expected_revision: int | None = None) -> int:
        k = _key_bytes(key)
        request = rpc.TxnRequest(
            compare=self._guard(k, expected_revision),
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k, keys_only=True))],
        )
        response = await self._txn(request)
        if not response.succeeded:
            raise self._failed(key, expected_revision, response)
        return int(response.header.revision)

    async def delete(self, key: str, expected_revision: int | None = None) -> int:
        k = _key_bytes(key)
        request = rpc.TxnRequest(
            compare=self._guard(k, expected_revision),
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=k, keys_only=True))],
        )
        response = await self._txn(request)
        if not response.succeeded:
            raise self._failed(key, expected_revision, response)
        return int(response.header.revision)

    # history ---------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        current = await self.revision()
        revision = min(revision, current)
        if revision <= 0:
            return
        request = rpc.CompactionRequest(revision=revision)
        try:
            await self._call(
                lambda e: e.kv.Compact(request, timeout=self._timeout), idempotent=True
            )
        except base.StoreError as error:
            cause = error.__cause__
            if isinstance(cause, grpc.aio.AioRpcError) and _COMPACTED in (cause.details() or ""):
                return  # already compacted at or past this revision
            raise

    async def watch(
        self, prefix: str, from_revision: int | None = None
    ) -> AsyncIterator[base.Event]:
        if from_revision is None:
            # Events after the revision read now: nothing between is lost.
            after = await self.revision()
        else:
            after = from_revision
            await self.check_revision(from_revision)
        create = rpc.WatchCreateRequest(
            key=_key_bytes(prefix),
            range_end=_range_end(prefix),
            start_revision=after + 1,
            prev_kv=True,
        )
        call, endpoint = await self._open_watch(rpc.WatchRequest(create_request=create))
        delivered = False
        try:
            while True:
                try:
                    response = await call.read()
                except grpc.aio.AioRpcError as error:
                    self._rotate(endpoint)
                    raise _map(error) from error
                if response is grpc.aio.EOF:
                    return
                if response.compact_revision:
                    if not delivered:
                        raise base.Compacted(after, int(response.compact_revision))
                    # Overtaken by a compaction mid-stream: end, as a dropped
                    # watcher does; resuming from the last event raises base.Compacted.
                    return
                delivered = delivered or bool(response.events)
                for event in response.events:
                    kv = event.kv
                    if event.type == rpc.Event.DELETE:
                        yield base.Event(
                            base.EventType.DELETED, kv.key.decode(), event.prev_kv.value,
                            kv.mod_revision,
                        )  # fmt: skip
                    else:
                        kind = (
                            base.EventType.ADDED
                            if kv.create_revision == kv.mod_revision
                            else base.EventType.MODIFIED
                        )
                        yield base.Event(kind, kv.key.decode(), kv.value, kv.mod_revision)
                if response.canceled:
                    # etcd dropped the watcher (e.g. lost leader): the caller
                    # resumes from the last revision it saw.
                    return
        finally:
            call.cancel()

    async def _open_watch(self, request: Any) -> tuple[Any, _Endpoint]:
        """A watch stream whose watcher etcd has created, trying each endpoint in turn."""
        start = self._current
        for attempt in range(len(self._endpoints)):
            endpoint = self._endpoints[(start + attempt) % len(self._endpoints)]  # each once
            call = endpoint.watch.Watch()
            try:
                await call.write(request)
                response = await call.read()
            except grpc.aio.AioRpcError as error:
                call.cancel()
                self._rotate(endpoint)
                if attempt == len(self._endpoints) - 1:
                    raise _map(error) from error
                continue
            if response is grpc.aio.EOF or not response.created:
                call.cancel()
                raise base.Unavailable(f"etcd {endpoint.target}: watch not created")
            if response.canceled:
                call.cancel()
                raise base.StoreError(f"etcd {endpoint.target}: {response.cancel_reason}")
            return call, endpoint
        raise AssertionError("unreachable")

    def _rotate(self, endpoint: _Endpoint) -> None:
        index = self._endpoints.index(endpoint)
        if self._current == index and len(self._endpoints) > 1:
            self._current = (index + 1) % len(self._endpoints)

    async def close(self) -> None:
        await asyncio.gather(*(e.close() for e in self._endpoints))


def _map(error: grpc.aio.AioRpcError) -> base.StoreError:
    if error.code() in _UNAVAILABLE or error.code() is grpc.StatusCode.CANCELLED:
        return base.Unavailable(f"etcd: {error.details()}")
    return base.StoreError(f"etcd: {error.details()}")
