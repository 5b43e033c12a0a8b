"""Krake's application hooks, put into what the kube controller applies.

An application with ``complete`` (or ``shutdown``) in ``spec.hooks`` gets, with
Krake's names, in every namespace its manifest uses (objects without a namespace:
the cluster's default one, where they go; ``<app>``: the application's name, lower
case with other marks as '-' and a digest when it is no Kubernetes name as it is):

- a Secret ``<app>-krake-<hook>-secret-token`` holding ``krake_<hook>_token`` (the
  application's ``status.<hook>_token``) and ``krake_<hook>_url`` (the API's
  ``/kubernetes/namespaces/<ns>/applications/<app>/<hook>``);
- in every container of every pod template, ``KRAKE_<HOOK>_TOKEN`` and
  ``KRAKE_<HOOK>_URL`` read from that Secret;
- when the API has a CA of its own (HTTPS), a Secret
  ``<app>-krake-<hook>-secret-certs`` with ``ca-bundle.pem``, mounted in every
  container at ``/etc/krake_<hook>_certs/`` and ``/etc/krake_<hook>_cert/`` (volume
  ``<app>-krake-<hook>-volume``; ``ca_paths``).

The workload then calls ``PUT <url>`` with ``{"token": <token>}``: ``complete``
deletes the application, ``shutdown`` says it is ready to be removed. The
token is the credential (docs/clouds.md, "Application hooks").
"""

from __future__ import annotations

import base64
import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.client.credentials import Credentials
from shoal.machinery.names import kube_name
from shoal.machinery.types import Obj

HOOKS = ("complete", "shutdown")
# where each kind keeps its pod template
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


@dataclass(frozen=True)
class HookSettings:
    """Where workloads reach the API (``endpoint``), and its CA (PEM) when it has one."""

    endpoint: str
    ca: str | None = None


ENDPOINT_SETTING = "SHOAL_HOOK_ENDPOINT"
CA_SETTING = "SHOAL_HOOK_CA"


def settings_from_environment(api_url: str) -> HookSettings:
    """``SHOAL_HOOK_ENDPOINT`` (default: the URL the controller uses) and the CA to give
    workloads: the file ``SHOAL_HOOK_CA``, else the CA the controller trusts, if any."""
    endpoint = os.environ.get(ENDPOINT_SETTING) or api_url
    ca_file = os.environ.get(CA_SETTING) or Credentials.resolve().ca
    ca = Path(ca_file).read_text() if ca_file and endpoint.startswith("https:") else None
    return HookSettings(endpoint=endpoint, ca=ca)


def ca_paths(hook: str) -> tuple[str, str]:
    """Where a container finds the API's CA (``ca-bundle.pem``): Krake's controller mounts it
    at ``/etc/krake_<hook>_certs/`` by default, while Krake's own deployments set
    ``/etc/krake_<hook>_cert/``, where Krake's hook scripts read it. Both, so that either
    kind of workload finds it."""
    return f"/etc/krake_{hook}_certs/", f"/etc/krake_{hook}_cert/"


def url(endpoint: str, hook: str, namespace: str, name: str) -> str:
    return f"{endpoint.rstrip('/')}/kubernetes/namespaces/{namespace}/applications/{name}/{hook}"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(name: str, namespace: str, data: dict[str, str]) -> Obj:
    """A Secret in ``namespace`` ("": where the manifest's objects without one go)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "type": "Opaque",
        "data": {key: _b64(value) for key, value in data.items()},
    }


def _pod_spec(obj: Obj) -> dict[str, Any] | None:
    path = _TEMPLATES.get(str(obj.get("kind")))
    if path is None:
        return None
    node: Any = obj
    for step in path:
        node = node.get(step) if isinstance(node, dict) else None
    spec = node.get("spec") if isinstance(node, dict) else None
    return spec if isinstance(spec, dict) else None


def _merge_named(items: list[Any], additions: list[Obj]) -> list[Any]:
    """``items`` with each of ``additions`` in place of the item of the same name."""
    names = {addition["name"] for addition in additions}
    return [i for i in items if not (isinstance(i, dict) and i.get("name") in names)] + additions


def with_hooks(
    manifest: Sequence[Obj],
    hooks: Sequence[str],
    tokens: dict[str, str | None],
    app: tuple[str, str],
    settings: HookSettings,
) -> list[Obj]:
    """``manifest`` with the Secrets, variables and mounts of each hook that has a token.

    ``app`` is the application's (namespace, name); ``tokens`` each hook's token
    (a hook without one yet is left out: the controller writes it first).
    """
    app_namespace, name = app
    active = [hook for hook in HOOKS if hook in hooks and tokens.get(hook)]
    if not active:
        return list(manifest)
    out = [copy.deepcopy(obj) for obj in manifest]
    namespaces = sorted({str((obj.get("metadata") or {}).get("namespace") or "")
                         for obj in manifest})  # fmt: skip
    for hook in active:
        # Krake's names, from the application's name as a Kubernetes name can hold it
        token_secret = f"{kube_name(name, 220)}-krake-{hook}-secret-token"
        certs_secret = f"{kube_name(name, 220)}-krake-{hook}-secret-certs"
        volume = f"{kube_name(name, 63 - len(f'-krake-{hook}-volume'))}-krake-{hook}-volume"
        env_token, env_url = f"KRAKE_{hook.upper()}_TOKEN", f"KRAKE_{hook.upper()}_URL"
        data = {env_token.lower(): str(tokens[hook]),
                env_url.lower(): url(settings.endpoint, hook, app_namespace, name)}  # fmt: skip
        for namespace in namespaces:
            out.append(_secret(token_secret, namespace, data))
            if settings.ca:
                out.append(_secret(certs_secret, namespace, {"ca-bundle.pem": settings.ca}))
        variables: list[Obj] = [
            {"name": variable,
             "valueFrom": {"secretKeyRef": {"name": token_secret, "key": variable.lower()}}}
            for variable in (env_token, env_url)
        ]  # fmt: skip
        for obj in out:
            spec = _pod_spec(obj)
            if spec is None:
                continue
            if settings.ca:
                spec["volumes"] = _merge_named(
                    list(spec.get("volumes") or []),
                    [{"name": volume, "secret": {"secretName": certs_secret}}],
                )
            for container in spec.get("containers") or []:
                container["env"] = _merge_named(list(container.get("env") or []), variables)
                if settings.ca:
                    mounts = [{"name": volume, "mountPath": path} for path in ca_paths(hook)]
                    container["volumeMounts"] = _merge_named(
                        list(container.get("volumeMounts") or []), mounts
                    )
    return out
