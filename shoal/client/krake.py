"""A client of a Krake API server, for Shoal's scheduler (``shoal scheduler --flavour
krake``, chosen in ``shoal.system.components``).

A ``ShoalClient`` that speaks Krake 1.0.1's API: the same routes and objects,
but no revisions, no batch bindings and Krake's reason-code names. So:

* every object read gets a local, increasing ``resource_version`` (Krake has
  none), which keeps the informers' bookkeeping; watches start from now, as
  Krake's own reflectors do;
* a batch of bindings goes out as one Krake ``ClusterBinding`` per
  application; preconditions cannot travel (Krake binds unconditionally);
* reason codes are renamed both ways where the names differ, and kinds Krake
  has no status for (metrics providers) or does not have at all (Shoal's
  ``scheduling`` group) are left alone, with a log line.

What Krake cannot store is dropped by Krake's API, so this client keeps an
application's scheduler fields (``SHOAL_ONLY``: the retry counts, the reason
it waits and the last explanation, which retry with delay needs) in memory
until the application is bound, and puts them back on every copy it reads;
each explanation also goes to the log. Field patches are sent as Krake's
whole-status update, with ``state`` and ``reason`` derived here.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Unpack

import aiohttp
import orjson
from pydantic import BaseModel

from shoal.client.rest import (
    ApiError,
    ListResult,
    ShoalClient,
    Unreachable,
    WatchEvent,
    WatchOptions,
    raise_for,
)
from shoal.client.wire import collection_path, item_path
from shoal.model import application_status, krake
from shoal.model.base import TRUSTED, Kind, ReasonCode
from shoal.model.kubernetes import Application

log = logging.getLogger(__name__)

TO_KRAKE = {"RESOURCE_NOT_FOUND": "NOT_FOUND", "CLUSTER_DELETED": "NOT_FOUND"}
FROM_KRAKE = {"NOT_FOUND": "RESOURCE_NOT_FOUND", "UNSUPPORTED_RESOURCE": "INVALID_RESOURCE"}
"""Reason-code names that differ; any other Krake name Shoal lacks reads as INTERNAL_ERROR."""

KRAKE_KINDS = frozenset(name for name in krake.FIELDS if not name.endswith("List"))
SHOAL_ONLY = (
    "scheduler_retries",
    "scheduling",
    "schedule_reason",
    "scheduler_attempts",
    "next_retry",
    "last_scheduled_to",
)
"""Application status fields Krake drops that the scheduler's retries depend on."""
WITH_STATUS = frozenset(name for name in KRAKE_KINDS if "status" in krake.FIELDS[name])


def _rename(data: Any, names: Mapping[str, str], known: frozenset[str] | None) -> Any:
    """``data`` with every ``reason.code`` and ``metrics_reasons`` code renamed."""
    if not isinstance(data, dict):
        return data
    status = data.get("status")
    if isinstance(status, dict):
        reasons = [status.get("reason"), *(status.get("metrics_reasons") or {}).values()]
        for reason in reasons:
            if isinstance(reason, dict) and isinstance(reason.get("code"), str):
                code = names.get(reason["code"], reason["code"])
                reason["code"] = code if known is None or code in known else "INTERNAL_ERROR"
    return data


_SHOAL_CODES = frozenset(ReasonCode.__members__)


class KrakeApi(ShoalClient):
    """The Shoal client's calls, made on a Krake API server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._revisions = itertools.count(1)
        self._revision = 0
        self._kept: dict[tuple[str | None, str], dict[str, Any]] = {}

    @classmethod
    def like(cls, client: ShoalClient) -> KrakeApi:
        """A Krake client with the URL and credentials of ``client``."""
        return cls(client.url, token=client.token or "", ssl_context=client.ssl_context)

    def _stamp(self, kind: type[Kind], data: Any) -> Any:
        obj = kind.model_validate(_rename(data, FROM_KRAKE, _SHOAL_CODES), context=TRUSTED)
        kept = self._kept.get((obj.metadata.namespace, obj.metadata.name))
        if kept is not None and isinstance(obj, Application):
            obj.status = obj.status.model_copy(update=kept)
        self._revision = next(self._revisions)
        obj.metadata.resource_version = self._revision
        return obj

    async def get(self, kind: type[Any], name: str, namespace: str | None = None) -> Any:
        return self._stamp(kind, await self.request("GET", item_path(kind, name, namespace)))

    async def list(
        self,
        kind: type[Any],
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page_size: int | None = None,
    ) -> ListResult[Any]:
        if kind.kind_name() not in KRAKE_KINDS:
            return ListResult([], self._revision)
        data = await self.request("GET", collection_path(kind, namespace))
        items = [self._stamp(kind, item) for item in data["items"]]
        return ListResult(items, self._revision)

    async def watch(
        self,
        kind: type[Any],
        namespace: str | None = None,
        *,
        resource_version: int | None = None,
        heartbeat: float = 10.0,
        label_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent[Any]]:
        if kind.kind_name() not in KRAKE_KINDS:
            await asyncio.Event().wait()  # Krake has no such kind: nothing ever happens
        timeout = aiohttp.ClientTimeout(total=None, connect=10.0, sock_read=heartbeat * 3)
        url = self.url + collection_path(kind, namespace)
        params = {"watch": "", "heartbeat": str(int(heartbeat))}
        try:
            async with self.session.get(url, params=params, timeout=timeout) as response:
                if response.status >= 400:
                    raise_for(response.status, await response.read())
                async for line in response.content:
                    if line.strip():
                        event = orjson.loads(line)
                        obj = self._stamp(kind, event["object"])
                        yield WatchEvent(event["type"], obj, self._revision)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise Unreachable(f"{self.url}: watch {kind.plural}: {error!r}") from error

    async def watch_json(
        self, kind: type[Any], namespace: str | None = None, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[dict[str, Any]]:
        """``watch``'s objects as JSON: Krake's own lack the revisions and the fields kept
        here, which informers reading JSON (``reads``, ``quiet``) need."""
        async for event in self.watch(kind, namespace, **options):
            yield {"type": event.type, "object": event.object.model_dump(mode="json")}

    async def update_status(self, obj: Any) -> Any:
        kind = type(obj)
        if kind.kind_name() not in WITH_STATUS:
            log.info("%s %s: Krake keeps no status for it", kind.kind_name(), obj.metadata.name)
            return obj
        if isinstance(obj, Application):
            self._kept[(obj.metadata.namespace, obj.metadata.name)] = {
                field: getattr(obj.status, field) for field in SHOAL_ONLY
            }
            if obj.status.scheduling:
                log.info(
                    "%s/%s: %s", obj.metadata.namespace, obj.metadata.name, obj.status.scheduling
                )
        path = item_path(kind, obj.metadata.name, obj.metadata.namespace) + "/status"
        body = _rename(obj.model_dump(mode="json"), TO_KRAKE, None)
        return self._stamp(kind, await self.request("PUT", path, body=body))

    async def patch_status(
        self,
        kind: type[Any],
        name: str,
        namespace: str | None,
        fields: Mapping[str, Any],
        resource_version: int | None = None,
    ) -> Any:
        """Krake has no field patch: read, set the fields, derive state and reason, PUT.

        No precondition either (Krake has no revisions), as for its bindings.
        """
        current = await self.get(kind, name, namespace)
        if isinstance(current, Application):
            application_status.fold_explicit(current.status)  # Krake controllers' state
            current.status = current.status.model_copy(update=dict(fields))
            application_status.apply(current.status)
        else:
            current.status = current.status.model_copy(update=dict(fields))
        return await self.update_status(current)

    async def bind_many(
        self, items: Sequence[BaseModel | Mapping[str, Any]]
    ) -> Sequence[dict[str, Any]]:
        """One Krake ``ClusterBinding`` per item (Krake has no batch and no precondition)."""
        results: list[dict[str, Any]] = []
        for entry in items:
            item = entry.model_dump(mode="json") if isinstance(entry, BaseModel) else dict(entry)
            path = item_path(Application, item["name"], item["namespace"] or None) + "/binding"
            body = {"api": "kubernetes", "kind": "ClusterBinding", "cluster": item["cluster"]}
            self._kept.pop((item["namespace"] or None, item["name"]), None)
            try:
                bound = self._stamp(Application, await self.request("PUT", path, body=body))
            except ApiError as error:
                results.append(
                    {"status": error.status, "title": error.title, "detail": error.detail}
                )
                continue
            if item.get("explanation"):
                log.info("%s/%s: %s", item["namespace"], item["name"], item["explanation"])
            results.append({"status": 200, "resource_version": bound.metadata.resource_version})
        return results
