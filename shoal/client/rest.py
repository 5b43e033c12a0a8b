"""The one async client of the Shoal API, used by every controller and the CLI.

Typed calls per kind (``await client.get(Application, "web", "default")``),
compare-and-swap updates through ``metadata.resource_version``, and watch
streams. Errors are ``ApiError`` subclasses carrying the problem document.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import aiohttp
import orjson
from pydantic import BaseModel

from shoal.client.credentials import Credentials
from shoal.client.wire import (
    collection_path,
    dry_run_query,
    dumped,
    item_path,
    query_params,
    wire,
)
from shoal.machinery.keepalive import CLIENT_KEEP_ALIVE
from shoal.model.base import TRUSTED, Kind, ResourceRef
from shoal.model.kubernetes import Application, Cluster
from shoal.model.subresources import ApplicationBinding, BindingItem, ClusterBinding

K = TypeVar("K", bound=Kind)

DEFAULT_URL = "http://127.0.0.1:8080"


def default_url() -> str:
    return os.environ.get("SHOAL_API", DEFAULT_URL)


FIELD_VALIDATION = "fieldValidation"
"""The API's query parameter for fields a body's kind does not have (Kubernetes' name)."""
_WRITES = frozenset(("POST", "PUT", "PATCH"))

NO_UPDATE_TITLE = "UPDATE_ERROR"
"""The title of the API's answer to an update that changes nothing on a Krake kind."""


class ApiError(Exception):
    """An error answer of the API, with its RFC 7807 problem document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{status} {self.title}: {self.detail}")


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Gone(ApiError):
    """The watch revision was compacted: list again."""


class Invalid(ApiError):
    pass


class Unreachable(Exception):
    """The API cannot be reached (connection refused, timed out, dropped)."""


_ERRORS: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone, 422: Invalid}


def error_for(status: int, problem: dict[str, Any]) -> ApiError:
    """The ApiError of a status and problem document (also for items of a batch answer)."""
    return _ERRORS.get(status, ApiError)(status, problem)


def raise_for(status: int, content: bytes) -> None:
    if status < 400:
        return
    try:
        problem = orjson.loads(content)
        if not isinstance(problem, dict):
            raise ValueError
    except ValueError:
        problem = {"title": "ERROR", "detail": content[:500].decode(errors="replace")}
    raise error_for(status, problem)


class WatchOptions(TypedDict, total=False):
    """A watch's options: after which revision (default: from now), the heartbeat
    period in seconds (the stream counts as gone after three missed), a label selector."""

    resource_version: int | None
    heartbeat: float
    label_selector: str | None


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[K]):
    type: str
    object: K
    revision: int


@dataclass(frozen=True, slots=True)
class ListResult(Generic[K]):
    items: list[K]
    revision: int




class ShoalClient:
    """Talks to one Shoal API. Uses aiohttp: a third of httpx's CPU per request here."""

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout: float = 30.0,
        max_connections: int = 64,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``token``: a bearer token; ``ssl_context``: the CA to trust and the client
        certificate to present. Both default to ``Credentials.resolve()`` ($SHOAL_TOKEN…)."""
        self.url = (url or default_url()).rstrip("/")
        self.timeout = timeout
        self.max_connections = max_connections
        if token is None or ssl_context is None:
            found = Credentials.resolve()
            token = token if token is not None else found.token
            ssl_context = ssl_context if ssl_context is not None else found.ssl_context()
        self.token = token
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The connection pool, made on first use (it belongs to the running loop)."""
        if self._session is None or self._session.closed:
            headers = {"content-type": "application/json"}
            if self.token:
                headers["authorization"] = f"Bearer {self.token}"
            connector = aiohttp.TCPConnector(
                limit=self.max_connections,
                ttl_dns_cache=300,
                # Well below the server's keep-alive: never reuse a connection it is closing.
                keepalive_timeout=CLIENT_KEEP_ALIVE,
                ssl=self.ssl_context if self.ssl_context is not None else True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers=headers,
                json_serialize=lambda obj: orjson.dumps(obj).decode(),
            )
        return self._session

    def use_token(self, token: str) -> None:
        """Send ``token`` from the next request on (a renewed credential)."""
        self.token = token
        if self._session is not None and not self._session.closed:
            self._session.headers["authorization"] = f"Bearer {token}"

    async def __aenter__(self) -> ShoalClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; the decoded JSON answer, or an ApiError.

        A write is ``Strict`` about fields the kind does not have (a 422 naming them):
        Shoal's own components and CLI send Shoal's schema, so such a field is a mistake.
        """
        content = orjson.dumps(body, default=wire) if body is not None else None
        if method in _WRITES:
            params = {FIELD_VALIDATION: "Strict", **(params or {})}
        try:
            async with self.session.request(
                method, self.url + path, data=content, params=query_params(params), headers=headers
            ) as response:
                data = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise Unreachable(f"{self.url}: {error!r}") from error
        raise_for(status, data)
        return orjson.loads(data) if data else None

    # typed calls ---------------------------------------------------------------

    async def create(self, obj: K, *, dry_run: bool = False) -> K:
        """Create ``obj``; with ``dry_run`` the API checks it and stores nothing."""
        path = collection_path(type(obj), obj.metadata.namespace)
        data = await self.request("POST", path, body=dumped(obj), params=dry_run_query(dry_run))
        return type(obj).model_validate(data, context=TRUSTED)

    async def create_many(
        self,
        objects: Sequence[K],
        *,
        dry_run: bool = False,
        chunk: int = 1000,
        max_bytes: int = 4 * 2**20,
    ) -> list[K | ApiError]:
        """Create objects of one kind (Application or Pod) in batches, each one request and
        one store commit, of at most ``chunk`` objects and about ``max_bytes`` (the API
        refuses bodies over 8 MiB): per object, in order, the object as stored or the
        ApiError of its own problem (one refused object leaves the others alone)."""
        if not objects:
            return []
        kind = type(objects[0])
        if any(type(obj) is not kind for obj in objects):
            raise ValueError("create_many: every object must be of one kind")
        batches: list[list[bytes]] = [[]]
        size = 0
        for obj in objects:
            item = orjson.dumps(dumped(obj))
            if batches[-1] and (len(batches[-1]) >= chunk or size + len(item) > max_bytes):
                batches.append([])
                size = 0
            batches[-1].append(item)
            size += len(item) + 1
        out: list[K | ApiError] = []
        for items in batches:
            body = orjson.Fragment(b'{"items":[%s]}' % b",".join(items))
            data = await self.request("POST", collection_path(kind), body=body,
                                      params=dry_run_query(dry_run))  # fmt: skip
            for result in data["results"]:
                if result["status"] == 200:
                    out.append(kind.model_validate(result["object"], context=TRUSTED))
                else:
                    out.append(error_for(result["status"], result))
        return out

    async def create_items(
        self, kind: type[Kind], items: Sequence[Mapping[str, Any]]
    ) -> Sequence[dict[str, Any]]:
        """A batch create of ``kind`` from JSON items (a ``Batcher``'s send): one result
        per item, ``status`` 200 with the ``resource_version``, or its problem."""
        data = await self.request("POST", collection_path(kind), body={"items": list(items)})
        results: Sequence[dict[str, Any]] = data["results"]
        return results

    async def get(self, kind: type[K], name: str, namespace: str | None = None) -> K:
        return kind.model_validate(
            await self.request("GET", item_path(kind, name, namespace)), context=TRUSTED
        )

    async def list(
        self,
        kind: type[K],
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page_size: int | None = None,
    ) -> ListResult[K]:
        """Every object (following ``continue`` pages), and the revision of the first page."""
        params: dict[str, Any] = {}
        if label_selector:
            params["label_selector"] = label_selector
        if page_size:
            params["limit"] = page_size
        items: list[K] = []
        revision: int | None = None
        while True:
            data = await self.request("GET", collection_path(kind, namespace), params=params)
            items.extend(kind.model_validate(item, context=TRUSTED) for item in data["items"])
            if revision is None:
                revision = int(data["metadata"]["resource_version"])
            token = data["metadata"].get("continue")
            if not token:
                return ListResult(items, revision)
            params["continue"] = token

    async def update(self, obj: K, *, dry_run: bool = False) -> K:
        """Replace ``obj``. An update that changes nothing answers the object as stored: the
        API answers it with Krake's 400 "no update" on Krake's kinds, which no caller of
        this client needs to tell from a write."""
        kind = type(obj)
        name, namespace = obj.metadata.name, obj.metadata.namespace
        path = item_path(kind, name, namespace)
        try:
            data = await self.request("PUT", path, body=dumped(obj), params=dry_run_query(dry_run))
        except ApiError as error:
            if error.status != 400 or error.title != NO_UPDATE_TITLE:
                raise
            return await self.get(kind, name, namespace)
        return kind.model_validate(data, context=TRUSTED)

    async def update_status(self, obj: K) -> K:
        kind = type(obj)
        path = item_path(kind, obj.metadata.name, obj.metadata.namespace) + "/status"
        return kind.model_validate(
            await self.request("PUT", path, body=dumped(obj)), context=TRUSTED
        )

    async def patch_status(
        self,
        kind: type[K],
        name: str,
        namespace: str | None,
        fields: Mapping[str, Any],
        resource_version: int | None = None,
    ) -> K:
        """Write only these status fields (JSON merge patch: ``None`` resets a field).

        The API merges them into the stored object under compare-and-swap, so
        other writers' fields are never sent back stale; with ``resource_version``
        the write is refused (Conflict) if the object changed since.
        """
        body: dict[str, Any] = {"status": dict(fields)}
        if resource_version is not None:
            body["metadata"] = {"resource_version": resource_version}
        path = item_path(kind, name, namespace) + "/status"
        data = await self.request("PATCH", path, body=body)
        return kind.model_validate(data, context=TRUSTED)

    async def set_finalizers(
        self,
        kind: type[Kind],
        name: str,
        namespace: str | None,
        finalizers: Sequence[str],
        resource_version: int | None = None,
    ) -> int:
        """Set ``metadata.finalizers`` alone (``PATCH`` of the item); the new resource_version.

        Cheaper than a whole update, and ``metadata.modified`` stays; with
        ``resource_version`` the write is refused (Conflict) if the object changed since.
        """
        metadata: dict[str, Any] = {"finalizers": list(finalizers)}
        if resource_version is not None:
            metadata["resource_version"] = resource_version
        path = item_path(kind, name, namespace)
        data = await self.request("PATCH", path, body={"metadata": metadata})
        return int(data["metadata"]["resource_version"])

    async def set_finalizers_many(
        self, items: Sequence[Mapping[str, Any]]
    ) -> Sequence[dict[str, Any]]:
        """Many applications' finalizers (``set_finalizers``) in one request: a result each.

        An item is ``namespace``, ``name``, ``finalizers`` and optionally
        ``resource_version``.
        """
        body = {"items": list(items)}
        data = await self.request("POST", "/scheduling/applicationfinalizers", body=body)
        results: Sequence[dict[str, Any]] = data["results"]
        return results

    async def patch_status_many(
        self, items: Sequence[Mapping[str, Any]]
    ) -> Sequence[dict[str, Any]]:
        """Many application status patches in one request: one result per item.

        An item is ``namespace``, ``name``, ``status`` (the fields to merge; models,
        enums and datetimes are sent in wire form) and optionally
        ``resource_version``; a result has ``status`` and, on 200, the new
        ``resource_version``.
        """
        body = {"items": [{**item, "status": dict(item["status"])} for item in items]}
        data = await self.request("POST", "/scheduling/applicationstatuses", body=body)
        results: Sequence[dict[str, Any]] = data["results"]
        return results

    async def delete(self, kind: type[K], name: str, namespace: str | None = None) -> K:
        return kind.model_validate(
            await self.request("DELETE", item_path(kind, name, namespace)), context=TRUSTED
        )

    async def bind(
        self,
        app: Application,
        cluster: ResourceRef,
        *,
        resource_version: int | None = None,
        triggered: bool = True,
        explanation: dict[str, Any] | None = None,
    ) -> Application:
        binding = ApplicationBinding(
            cluster=cluster,
            resource_version=resource_version,
            triggered=triggered,
            explanation=explanation,
        )
        path = item_path(Application, app.metadata.name, app.metadata.namespace) + "/binding"
        data = await self.request("PUT", path, body=binding.model_dump(mode="json"))
        return Application.model_validate(data, context=TRUSTED)

    async def bind_many(
        self, items: Sequence[BindingItem | Mapping[str, Any]]
    ) -> Sequence[dict[str, Any]]:
        """Many bindings in one request: one result per item (``status``, ``resource_version``).

        Items are BindingItem models or their JSON form (the scheduler's hot path
        builds dicts; the server validates them either way).
        """
        bindings = [i.model_dump(mode="json") if isinstance(i, BaseModel) else i for i in items]
        data = await self.request("POST", "/scheduling/bindings", body={"bindings": bindings})
        results: Sequence[dict[str, Any]] = data["results"]
        return results

    async def bind_cluster(
        self, cluster: Cluster, cloud: ResourceRef, *, resource_version: int | None = None
    ) -> Cluster:
        binding = ClusterBinding(cloud=cloud, resource_version=resource_version)
        path = item_path(Cluster, cluster.metadata.name, cluster.metadata.namespace) + "/binding"
        data = await self.request("PUT", path, body=binding.model_dump(mode="json"))
        return Cluster.model_validate(data, context=TRUSTED)

    async def watch(
        self, kind: type[K], namespace: str | None = None, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[WatchEvent[K]]:
        """Events after ``resource_version`` (default: from now) until the stream ends.

        Raises Gone when the revision was compacted and Unreachable when the
        connection drops or goes silent for three heartbeats.
        """
        async for event in self.watch_json(kind, namespace, **options):
            # orjson, then the model from Python objects: a fifth cheaper than
            # pydantic's own JSON parsing, whose free-form fields (manifests, the
            # scheduling explanation) cost most of an application's decoding
            obj = kind.model_validate(event["object"], context=TRUSTED)
            revision = int(obj.metadata.resource_version or 0)
            yield WatchEvent(event["type"], obj, revision)

    async def watch_json(
        self, kind: type[Kind], namespace: str | None = None, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[dict[str, Any]]:
        """``watch`` as decoded JSON (``type``, ``object``), for readers of a few fields:
        building the models is most of a watch's cost."""
        heartbeat = options.get("heartbeat", 10.0)
        params: dict[str, Any] = {"watch": "", "heartbeat": heartbeat}
        if options.get("resource_version") is not None:
            params["resource_version"] = options["resource_version"]
        if options.get("label_selector"):
            params["label_selector"] = options["label_selector"]
        timeout = aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=heartbeat * 3)
        url = self.url + collection_path(kind, namespace)
        try:
            get = self.session.get(url, params=query_params(params), timeout=timeout)
            async with get as response:
                if response.status >= 400:
                    raise_for(response.status, await response.read())
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line:  # else a heartbeat
                            yield orjson.loads(line)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise Unreachable(f"{self.url}: watch {kind.plural}: {error!r}") from error
