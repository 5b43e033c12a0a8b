"""The Kubernetes REST API of one simulated cluster, as a plain ASGI handler.

No framework routing and no per-request models: the path is split by hand and
objects stay dicts serialised with orjson, which keeps a 5,000-node list cheap.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

import orjson
import yaml

from shoal.machinery.patch import PATCH_TYPES, PatchError, json_patch, merge_patch, patch_type
from shoal.machinery.selectors import LabelSelector
from shoal.machinery.selectors.fields import FieldSelector
from shoal.machinery.types import Obj
from shoal.sim.asgi import (
    Request,
    Send,
    abort_connection,
    load_yaml,
    respond,
    respond_error,
)
from shoal.sim.cluster import SimCluster
from shoal.sim.openapi import openapi_v2, openapi_v3_gv, openapi_v3_root
from shoal.sim.resources import ResourceType
from shoal.sim.store import ApiError, Store, Watcher, clone
from shoal.sim.tables import table

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-shoal-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

BOOKMARK_INTERVAL = 10.0


def _encode_continue(rv: int, ns: str, name: str) -> str:
    raw = orjson.dumps({"rv": rv, "start": [ns, name]})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ApiError(400, "BadRequest", "invalid continue token") from exc


class ClusterApi:
    """Routes one cluster's requests (paths below ``/clusters/{name}``)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster

    async def __call__(self, req: Request) -> None:
        cluster = self.cluster
        if cluster.unreachable:
            abort_connection(req.send)
            return
        peer = req.scope.get("client") or ("", 0)
        cluster.requests.append({
            "time": time.time(), "method": req.method, "path": req.path,
            "user_agent": req.headers.get("user-agent", ""), "peer": f"{peer[0]}:{peer[1]}",
        })  # fmt: skip
        auth = req.headers.get("authorization")
        if auth and auth != f"Bearer {cluster.token}":
            await respond_error(req.send, ApiError(401, "Unauthorized", "Unauthorized"))
            return
        if cluster.latency:
            await asyncio.sleep(cluster.latency)
        cluster.start()
        try:
            await self.route(req)
        except ApiError as err:
            await respond_error(req.send, err)

    async def route(self, req: Request) -> None:
        path = req.path.rstrip("/")
        parts = [p for p in path.split("/") if p]
        reg = self.cluster.registry
        send = req.send
        if not parts:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version",
                     "/openapi/v2", "/openapi/v3"]
            paths += [f"/apis/{g}" for g in reg.groups()]
            await respond(send, 200, {"paths": paths})
            return
        head = parts[0]
        if head == "version":
            await respond(send, 200, VERSION)
            return
        if head in ("healthz", "livez", "readyz"):
            await respond(send, 200, b"ok", "text/plain")
            return
        if head == "openapi":
            await self.openapi(req, parts[1:])
            return
        if head == "api":
            if len(parts) == 1:
                await respond(send, 200, reg.api_versions())
                return
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                await respond(send, 200, reg.api_group_list())
                return
            if len(parts) == 2:
                g = reg.api_group(parts[1])
                if g is None:
                    raise ApiError(404, "NotFound", "the server could not find the requested "
                                   "resource")
                await respond(send, 200, g)
                return
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            doc = reg.resource_list(group, version)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await respond(send, 200, doc)
            return
        await self.resource(req, group, version, rest)

    async def openapi(self, req: Request, rest: list[str]) -> None:
        reg = self.cluster.registry
        if rest == ["v2"] and (v2 := openapi_v2(reg)) is not None:
            await respond(req.send, 200, v2)
        elif rest == ["v3"]:
            await respond(req.send, 200, openapi_v3_root(reg))
        elif len(rest) >= 3 and rest[0] == "v3":
            doc = openapi_v3_gv(reg, "/".join(rest[1:]))
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await respond(req.send, 200, doc)
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # -- resources -------------------------------------------------------------

    async def resource(self, req: Request, group: str, version: str, rest: list[str]) -> None:
        rt, namespace, name, sub = self._resolve(group, version, rest)
        if name is None:
            await self._collection(req, rt, namespace)
            return
        ns = namespace or ""
        if sub == "binding":
            await self._bind(req, ns, name)
        elif sub == "scale":
            await self.scale(req, rt, ns, name)
        elif req.method == "GET":
            obj = self.cluster.get(rt, ns, name)
            if req.wants_table() and sub is None:
                obj = table(rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                            req.query.get("includeObject", "Metadata"))
            await respond(req.send, 200, obj)
        elif req.method == "PUT":
            body = await req.json()
            self._check_kind(rt, body)
            obj = self.cluster.update(rt, ns, name, body, sub, self._dry(req))
            await respond(req.send, 200, obj)
        elif req.method == "PATCH":
            await self._patch(req, rt, ns, name, sub)
        elif req.method == "DELETE":
            await self._delete(req, rt, ns, name)
        else:
            raise ApiError(405, "MethodNotAllowed", f"method {req.method} not allowed")

    def _resolve(
        self, group: str, version: str, rest: list[str]
    ) -> tuple[ResourceType, str | None, str | None, str | None]:
        """The resource type, namespace, name and subresource a path names (404 if none)."""
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (
            len(rest) == 3 and rest[2] in ("status", "finalize")
        ):
            namespace, rest = rest[1], rest[2:]
        rt = self.cluster.registry.get(group, version, rest[0])
        if rt is None or (namespace is not None and not rt.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None and sub not in rt.subresources and not (
            rt.key == "/namespaces" and sub == "finalize"
        ):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rt, namespace, name, sub

    async def _collection(self, req: Request, rt: ResourceType, namespace: str | None) -> None:
        m = req.method
        if m == "GET":
            if req.flag("watch"):
                await self.watch(req, rt, namespace)
            else:
                await self.list(req, rt, namespace)
        elif m == "POST":
            body = await req.json()
            self._check_kind(rt, body)
            obj = self.cluster.create(rt, body, namespace, self._dry(req))
            await respond(req.send, 201, obj)
        elif m == "DELETE":
            await self.delete_collection(req, rt, namespace)
        else:
            raise ApiError(405, "MethodNotAllowed", f"method {m} not allowed")

    async def _bind(self, req: Request, ns: str, name: str) -> None:
        if req.method != "POST":
            raise ApiError(405, "MethodNotAllowed", f"method {req.method} not allowed")
        body = await req.json()
        target = (body.get("target") or {}).get("name")
        if not target:
            raise ApiError(422, "Invalid", "target.name: Required value")
        self.cluster.bind(ns, name, str(target))
        await respond(req.send, 201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                      "status": "Success", "code": 201})

    async def _patch(
        self, req: Request, rt: ResourceType, ns: str, name: str, sub: str | None
    ) -> None:
        ptype = _patch_type(req)
        raw = await req.body()
        try:
            body = load_yaml(raw) if ptype == "apply" else orjson.loads(raw or b"{}")
        except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"invalid patch: {exc}") from exc
        existed = self.cluster.store.get(rt.key, ns if rt.namespaced else "", name)
        obj = self.cluster.patch(
            rt, ns, name, ptype, body, sub,
            field_manager=req.query.get("fieldManager"),
            force=req.flag("force"),
            dry_run=self._dry(req),
        )
        await respond(req.send, 201 if existed is None else 200, obj)

    async def _delete(self, req: Request, rt: ResourceType, ns: str, name: str) -> None:
        body = await req.json()
        if not isinstance(body, dict):
            body = {}
        pre = body.get("preconditions") or {}
        policy = req.query.get("propagationPolicy") or body.get("propagationPolicy")
        if body.get("orphanDependents") is True or req.query.get("orphanDependents") == "true":
            policy = "Orphan"
        gone = self.cluster.delete(
            rt, ns, name, policy or "Background", self._dry(req),
            pre.get("resourceVersion"), pre.get("uid"),
        )
        await respond(req.send, 200, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": rt.group, "kind": rt.plural,
                        "uid": gone["metadata"]["uid"]},
        })

    @staticmethod
    def _dry(req: Request) -> bool:
        return req.query.get("dryRun") == "All"

    @staticmethod
    def _check_kind(rt: ResourceType, body: Any) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body must be a JSON object")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind and kind != rt.kind:
            raise ApiError(400, "BadRequest", f"the kind {kind!r} does not match {rt.kind!r}")
        if api_version and api_version != rt.api_version:
            raise ApiError(400, "BadRequest",
                           f"the API version {api_version!r} does not match {rt.api_version!r}")

    def _predicate(self, req: Request) -> Callable[[Obj], bool] | None:
        label_text = (req.query.get("labelSelector") or "").strip()
        field_text = (req.query.get("fieldSelector") or "").strip()
        try:
            labels = LabelSelector.parse(label_text) if label_text else None
            fields = FieldSelector.parse(field_text) if field_text else None
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {exc}") from exc
        if labels is None and fields is None:
            return None

        def pred(obj: Obj) -> bool:
            if labels is not None and not labels.matches(obj["metadata"].get("labels") or {}):
                return False
            return fields is None or fields.matches(obj)

        return pred

    async def list(self, req: Request, rt: ResourceType, namespace: str | None) -> None:
        store = self.cluster.store
        items = store.list(rt.key, namespace, self._predicate(req))
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        rv = store.rv
        token = req.query.get("continue")
        if token:
            rv, start = _decode_continue(token)
            items = [o for o in items
                     if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
        meta: Obj = {"resourceVersion": str(rv)}
        limit = int(req.query.get("limit") or 0)
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = _encode_continue(rv, last.get("namespace", ""), last["name"])
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if req.wants_table():
            await respond(req.send, 200,
                          table(rt, items, meta, req.query.get("includeObject", "Metadata")))
            return
        await respond(req.send, 200, {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": meta,
            "items": items,
        })

    async def delete_collection(self, req: Request, rt: ResourceType,
                                namespace: str | None) -> None:
        items = self.cluster.store.list(rt.key, namespace, self._predicate(req))
        for obj in items:
            meta = obj["metadata"]
            if self.cluster.store.get(rt.key, meta.get("namespace", ""), meta["name"]):
                self.cluster.delete(rt, meta.get("namespace", ""), meta["name"],
                                    req.query.get("propagationPolicy") or "Background",
                                    self._dry(req))
        await respond(req.send, 200, {"kind": rt.list_kind, "apiVersion": rt.api_version,
                                      "metadata": {"resourceVersion": str(
                                          self.cluster.store.rv)}, "items": items})

    async def scale(self, req: Request, rt: ResourceType, ns: str, name: str) -> None:
        obj = self.cluster.get(rt, ns, name)

        def to_scale(o: Obj) -> Obj:
            sel = (o.get("spec") or {}).get("selector") or {}
            sel_text = ",".join(f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items())
            meta = o["metadata"]
            return {
                "kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                  "creationTimestamp") if k in meta},
                "spec": {"replicas": (o.get("spec") or {}).get("replicas", 1)},
                "status": {"replicas": (o.get("status") or {}).get("replicas", 0),
                           "selector": sel_text},
            }

        if req.method == "GET":
            await respond(req.send, 200, to_scale(obj))
            return
        current = to_scale(obj)
        body = await req.json()
        if req.method == "PUT":
            new_scale = body
        elif req.method == "PATCH":
            ptype = _patch_type(req)
            try:
                new_scale = json_patch(current, body) if ptype == "json" else merge_patch(
                    current, body)
            except PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from exc
        else:
            raise ApiError(405, "MethodNotAllowed", f"method {req.method} not allowed")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Invalid", "spec.replicas: must be a non-negative integer")
        new = clone(obj)
        new["spec"]["replicas"] = replicas
        rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        new["metadata"]["resourceVersion"] = rv or obj["metadata"]["resourceVersion"]
        stored = self.cluster.update(rt, ns, name, new, None, self._dry(req), bool(rv))
        await respond(req.send, 200, to_scale(stored))

    # -- watch -----------------------------------------------------------------

    async def watch(self, req: Request, rt: ResourceType, namespace: str | None) -> None:
        store = self.cluster.store
        pred = self._predicate(req)
        rv_text = req.query.get("resourceVersion", "")
        try:
            since: int | None = int(rv_text) if rv_text else None
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_text!r}") from exc
        initial = req.flag("sendInitialEvents")
        if initial:
            since = None
        watcher = store.watch(rt, namespace, pred, since)
        try:
            await self._stream(req, rt, watcher, initial)
        finally:
            store.unwatch(watcher)

    async def _stream(self, req: Request, rt: ResourceType, watcher: Watcher,
                      initial: bool) -> None:
        send = req.send
        events = _WatchLines(rt, self.cluster.store, req.wants_table(),
                             req.query.get("includeObject", "Metadata"))
        bookmarks = req.flag("allowWatchBookmarks")
        timeout = float(req.query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"),
                        (b"cache-control", b"no-cache, private"),
                        (b"transfer-encoding", b"chunked")],
        })

        async def disconnected() -> None:
            while True:
                msg = await req.receive()
                if msg["type"] == "http.disconnect":
                    watcher.queue.put_nowait(None)
                    return

        waiter = asyncio.create_task(disconnected())
        try:
            if initial and not await _send_initial(send, watcher, events):
                return
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    # no timer when an event is already waiting, and never a task (wait_for's)
                    if not watcher.queue.empty():
                        item = watcher.queue.get_nowait()
                    else:
                        async with asyncio.timeout(min(left, BOOKMARK_INTERVAL)):
                            item = await watcher.queue.get()
                except TimeoutError:
                    if bookmarks and time.monotonic() < deadline:
                        await send({"type": "http.response.body", "body": events.bookmark(),
                                    "more_body": True})
                    continue
                if item is None:
                    if self.cluster.unreachable:
                        abort_connection(send)
                        return
                    break
                await send({"type": "http.response.body", "body": _chunk(watcher, events, item),
                            "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return
        finally:
            waiter.cancel()


class _WatchLines:
    """A watch's events as the lines it streams: JSON objects, or table rows when asked."""

    def __init__(self, rt: ResourceType, store: Store, as_table: bool, include: str) -> None:
        self.rt, self.store, self.as_table, self.include = rt, store, as_table, include

    def encode(self, etype: str, obj: Obj) -> bytes:
        if self.as_table and etype != "BOOKMARK":
            obj = table(self.rt, [obj], {"resourceVersion": obj["metadata"].get(
                "resourceVersion", "")}, self.include)
        return orjson.dumps({"type": etype, "object": obj}) + b"\n"

    def bookmark(self, extra: Obj | None = None) -> bytes:
        meta: Obj = {"resourceVersion": str(self.store.rv)}
        if extra:
            meta["annotations"] = extra
        return self.encode("BOOKMARK", {"kind": self.rt.kind, "apiVersion": self.rt.api_version,
                                        "metadata": meta})


async def _send_initial(send: Send, watcher: Watcher, events: _WatchLines) -> bool:
    """The events already queued, then the bookmark that ends the initial ones; False when
    the watch ended meanwhile."""
    batch = []
    while not watcher.queue.empty():
        item = watcher.queue.get_nowait()
        if item is None:
            return False
        batch.append(events.encode(*item))
    batch.append(events.bookmark({"k8s.io/initial-events-end": "true"}))
    await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
    return True


def _chunk(watcher: Watcher, events: _WatchLines, item: tuple[str, Obj]) -> bytes:
    """``item`` with what is already queued behind it, in one chunk: fewer, larger writes
    (an end of the watch found there is put back for the next read)."""
    chunks = [events.encode(*item)]
    while not watcher.queue.empty() and len(chunks) < 500:
        nxt = watcher.queue.get_nowait()
        if nxt is None:
            watcher.queue.put_nowait(None)
            break
        chunks.append(events.encode(*nxt))
    return b"".join(chunks)


def _patch_type(req: Request) -> str:
    """The patch kind of a PATCH request; 415 for a content type that is not a patch."""
    kind = patch_type(req.headers.get("content-type", ""))
    if kind is None:
        raise ApiError(415, "UnsupportedMediaType",
                       f"the body of the request was in an unknown format - accepted media "
                       f"types include: {', '.join(PATCH_TYPES)}")
    return kind
