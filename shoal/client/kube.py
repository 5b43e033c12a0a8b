"""Member-cluster access: a kubernetes_asyncio ApiClient per cluster, and raw REST calls.

Manifests name any kind, so objects are handled as dicts through
``ApiClient.call_api`` with paths found by API discovery (cached per
cluster), not through the typed APIs. Errors are mapped to two exceptions
the controllers act on: ``KubeUnreachable`` (network, timeout) and
``KubeApiError`` (an HTTP error answer).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import kube_config as kube_config_loader
from kubernetes_asyncio.config.exec_provider import ExecProvider

from shoal.client.informer import cache_key
from shoal.machinery.types import Obj
from shoal.model.kubernetes import Cluster
from shoal.model.validation.kubeconfig import check_credentials, credential_policy

log = logging.getLogger(__name__)

ClusterKey = tuple[str | None, str]

FIELD_MANAGER = "shoal"
DEFAULT_TIMEOUT = 5.0


class KubeUnreachable(Exception):
    """The cluster's API did not answer (connection refused or dropped, timeout)."""


class KubeApiError(Exception):
    """The cluster's API answered with an error status."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        self.status = status
        self.reason = reason
        self.body = body
        super().__init__(f"{status} {reason}: {body[:300]}")


def compacted(error: Exception) -> bool:
    """410 Gone: the resourceVersion a watch resumes from is compacted; list again at once."""
    return isinstance(error, KubeApiError) and error.status == 410


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    plural: str
    namespaced: bool


@dataclass
class KubeCluster:
    """One member cluster: its ApiClient and its discovered resource types."""

    api: ApiClient
    fingerprint: bytes
    timeout: float = DEFAULT_TIMEOUT
    resources: dict[tuple[str, str], ResourceInfo] = field(default_factory=dict)
    discovered: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)  # known to exist (asked once)
    # (token, headers, query parameters) of the credentials, see _auth
    auth: tuple[str | None, dict[str, str], list[tuple[str, str]]] | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """One call; the decoded JSON answer.

        Sent on the ApiClient's session (its TLS, proxy, and credentials,
        refreshed as the ApiClient would) but encoded and decoded with orjson:
        the generated client's generic (de)serialisation of every body was a
        good part of the kube controller's time under load.
        """
        headers = {**self.api.default_headers, "Content-Type": content_type}
        headers["Accept"] = "application/json"
        params: list[tuple[str, str]] = [(k, str(v)) for k, v in (query or {}).items()]
        rest = self.api.rest_client
        options: dict[str, Any] = {}
        if rest.proxy:
            options["proxy"] = rest.proxy
            if rest.proxy_headers:
                options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        try:
            auth_headers, auth_params = await self._auth()
            headers.update(auth_headers)
            params += auth_params
            async with rest.pool_manager.request(
                method,
                f"{self.api.configuration.host}{path}",
                params=params or None,
                data=None if body is None else orjson.dumps(body),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.timeout),
                **options,
            ) as response:
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise KubeUnreachable(f"{type(error).__name__}: {error}") from error
        if response.status >= 400:
            raise KubeApiError(response.status, str(response.reason), raw.decode(errors="replace"))
        try:
            return orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError as error:
            raise KubeApiError(
                response.status, "NotJSON", raw[:300].decode(errors="replace")
            ) from error

    async def _auth(self) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """The credentials, asked of the ApiClient again only when they may change.

        Its settings are rebuilt for every call (a tenth of an apply's overhead);
        a token refreshed by a hook (exec, OIDC) is still asked for each time.
        """
        config = self.api.configuration
        token = config.api_key.get("BearerToken")
        if self.auth is None or self.auth[0] != token or config.refresh_api_key_hook:
            headers: dict[str, str] = {}
            params: list[tuple[str, str]] = []
            await self.api.update_params_for_auth(headers, params, ["BearerToken"])
            self.auth = (token, headers, params)
        return self.auth[1], self.auth[2]

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Plural and scope of a kind, from discovery (re-read once when unknown)."""
        key = (api_version, kind)
        if key not in self.resources or api_version not in self.discovered:
            await self._discover(api_version)
        info = self.resources.get(key)
        if info is None:
            raise KubeApiError(404, "NotFound", f"no resource type {kind} in {api_version}")
        return info

    async def _discover(self, api_version: str) -> None:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        data = await self.request("GET", path)
        for item in data.get("resources", []):
            if "/" in item["name"]:
                continue  # subresource
            info = ResourceInfo(item["name"], bool(item.get("namespaced")))
            self.resources[(api_version, item["kind"])] = info
        self.discovered.add(api_version)

    async def path(self, obj: Obj, default_namespace: str = "default") -> str:
        """URL path of a manifest object (namespaced kinds get a namespace)."""
        api_version: str = obj["apiVersion"]
        info = await self.resource(api_version, obj["kind"])
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        name = obj["metadata"]["name"]
        if info.namespaced:
            namespace = obj["metadata"].get("namespace") or default_namespace
            return f"{base}/namespaces/{namespace}/{info.plural}/{name}"
        return f"{base}/{info.plural}/{name}"

    async def collection(self, api_version: str, kind: str, namespace: str) -> str:
        """URL path of a kind's list (in ``namespace`` when the kind is namespaced)."""
        info = await self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if info.namespaced:
            return f"{base}/namespaces/{namespace}/{info.plural}"
        return f"{base}/{info.plural}"

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[Obj]:
        """Events of a list from ``resource_version`` on, until the server ends the stream.

        410 (as an answer or as an ERROR event) raises ``KubeApiError(410)``: re-list.
        """
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        try:
            response = await self.api.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=aiohttp.ClientTimeout(
                    total=timeout_seconds + 30, sock_connect=self.timeout
                ),
            )
        except ApiException as error:
            raise KubeUnreachable(str(error)) from error
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise KubeUnreachable(f"{type(error).__name__}: {error}") from error
        try:
            if response.status != 200:
                body = (await response.read()).decode(errors="replace")
                raise KubeApiError(response.status, str(response.reason), body)
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as error:
                    raise KubeUnreachable(f"{type(error).__name__}: {error}") from error
                if not line:
                    return
                if not line.strip():
                    continue
                event: Obj = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise KubeApiError(
                        int(status.get("code") or 500),
                        str(status.get("reason") or "Error"),
                        str(status.get("message") or ""),
                    )
                yield event
        finally:
            response.release()

    async def apply(self, obj: Obj, default_namespace: str = "default") -> Obj:
        """Server-side apply (field manager ``shoal``, forced)."""
        path = await self.path(obj, default_namespace)
        result: Obj = await self.request(
            "PATCH",
            path,
            body=obj,
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            content_type="application/apply-patch+yaml",
        )
        return result

    async def read(self, obj: Obj, default_namespace: str = "default") -> Obj | None:
        try:
            result: Obj = await self.request("GET", await self.path(obj, default_namespace))
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise
        return result

    async def delete(
        self, obj: Obj, default_namespace: str = "default", *, uid: str | None = None
    ) -> bool:
        """Delete (background propagation); False when it was already gone.

        With ``uid``, only that very object: one recreated meanwhile under the
        same name is left alone (409, also answered False).
        """
        body: Obj = {"propagationPolicy": "Background"}
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", await self.path(obj, default_namespace), body=body)
        except KubeApiError as error:
            if error.status == 404 or (error.status == 409 and uid is not None):
                return False
            raise
        return True

    async def ensure_namespace(self, namespace: str) -> None:
        if namespace in self.namespaces:
            return
        await self._create_namespace(namespace)
        self.namespaces.add(namespace)

    async def _create_namespace(self, namespace: str) -> None:
        try:
            await self.request("GET", f"/api/v1/namespaces/{namespace}")
        except KubeApiError as error:
            if error.status != 404:
                raise
            try:
                await self.request(
                    "POST",
                    "/api/v1/namespaces",
                    body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
            except KubeApiError as create_error:
                if create_error.status != 409:
                    raise


class KubeClients:
    """ApiClients cached per cluster; rebuilt when the cluster's kubeconfig changes."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self._clusters: dict[ClusterKey, KubeCluster] = {}
        self._lock = asyncio.Lock()

    async def get(self, cluster: Cluster) -> KubeCluster:
        if cluster.spec.kubeconfig is None:
            raise KubeUnreachable(f"cluster {cluster.metadata.name} has no kubeconfig")
        key = cache_key(cluster)
        fingerprint = orjson.dumps(cluster.spec.kubeconfig, option=orjson.OPT_SORT_KEYS)
        current = self._clusters.get(key)
        if current is not None and current.fingerprint == fingerprint:
            return current
        async with self._lock:
            current = self._clusters.get(key)
            if current is not None and current.fingerprint == fingerprint:
                return current
            try:
                api = await api_client(cluster.spec.kubeconfig)
            except (kube_config.ConfigException, ValueError, KeyError) as error:
                raise KubeApiError(400, "InvalidKubeconfig", str(error)) from error
            if current is not None:
                await _close(current.api)
            fresh = KubeCluster(api, fingerprint, self.timeout)
            self._clusters[key] = fresh
            return fresh

    async def forget(self, namespace: str | None, name: str) -> None:
        current = self._clusters.pop((namespace, name), None)
        if current is not None:
            await _close(current.api)

    async def close(self) -> None:
        clusters, self._clusters = list(self._clusters.values()), {}
        for cluster in clusters:
            await _close(cluster.api)


async def api_client(kubeconfig: dict[str, Any]) -> ApiClient:
    """A kubernetes client for a kubeconfig, as every Shoal process talks to member clusters.

    Unless a proxy or a netrc file is set up, aiohttp is kept from looking for them
    in a thread on every request (a tenth of the kube controller's and of a busy
    agent's time under load).
    """
    refused = list(check_credentials(kubeconfig, "kubeconfig", credential_policy()))
    if refused:
        raise ValueError("; ".join(f"{f.field}: {f.reason}" for f in refused))
    api = await kube_config.new_client_from_config_dict(kubeconfig)
    api.user_agent = user_agent()
    if not _environment_matters():
        api.rest_client.pool_manager._trust_env = False
    return api


def user_agent() -> str:
    """What Shoal's processes call themselves on a member cluster: the version and the pid,
    so that a cluster's request log tells which process reached it."""
    try:
        version = importlib.metadata.version("shoal")
    except importlib.metadata.PackageNotFoundError:
        version = "dev"
    return f"shoal/{version} (pid {os.getpid()})"


_PLUGIN_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


class _PluginExec(ExecProvider):
    """An allowed ``exec`` plugin, run with none of Shoal's own environment.

    The library gives the command this process's whole environment (a
    component's ``SHOAL_TOKEN`` among it); it gets only ``PATH``, ``HOME``,
    the locale and what its own ``env`` entries set.
    """

    def __init__(self, exec_config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(exec_config, *args, **kwargs)
        names = [item["name"] for item in exec_config.safe_get("env") or ()]
        own = {name: self.env[name] for name in names}
        base = {k: v for k in _PLUGIN_ENVIRONMENT if (v := os.environ.get(k)) is not None}
        self.env = {**base, **own}


kube_config_loader.ExecProvider = _PluginExec  # type: ignore[misc]


def _environment_matters() -> bool:
    """A proxy or a netrc file that aiohttp's ``trust_env`` would use is set up."""
    names = ("http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy", "netrc")
    if any(os.environ.get(n) or os.environ.get(n.upper()) for n in names):
        return True
    return (Path.home() / ".netrc").exists() or (Path.home() / "_netrc").exists()


async def _close(api: ApiClient) -> None:
    try:
        await api.close()
    except Exception:  # closing is best effort
        log.debug("closing a kubernetes client failed", exc_info=True)
