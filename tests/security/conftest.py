"""A secured API (static tokens, RBAC, encrypted secrets) and clients of its users.

Users: ``admin`` (group shoal:admins), ``alice`` with every right in namespace
``a`` and ``bob`` with every right in namespace ``b``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.auth import Security
from shoal.api.auth.secrets import new_key
from shoal.api.server import ApiServer, start_api
from tests.api.samples import KUBECONFIG

TOKENS = {
    "admin": "admin-token",
    "alice": "alice-token",
    "bob": "bob-token",
    "system:kube-controller": "kube-token",
    "system:reschedule-controller": "reschedule-token",
}
GROUPS = {"admin": "shoal:admins"}


def token_file(path: Path) -> Path:
    lines = [f'{t},{u},{u},"{GROUPS.get(u, "")}"' for u, t in TOKENS.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def role(
    name: str,
    api: str = "*",
    resources: tuple[str, ...] = ("*",),
    namespaces: tuple[str, ...] = ("",),
    verbs: tuple[str, ...] = ("*",),
) -> dict[str, Any]:
    """A Role of one rule ("*" is any group, resource or verb; "" any namespace)."""
    rule = {"api": api, "resources": resources, "namespaces": namespaces, "verbs": verbs}
    return {"api": "core", "kind": "Role", "metadata": {"name": name}, "rules": [rule]}


def tenant_role(namespace: str) -> dict[str, Any]:
    return role(f"tenant-{namespace}", namespaces=(namespace,))


async def grant(admin: httpx.AsyncClient, user: str, body: dict[str, Any]) -> None:
    """Create the role ``body`` and bind ``user`` to it (a binding of the same name)."""
    name = body["metadata"]["name"]
    assert (await admin.post("/core/roles", json=body)).status_code == 200
    answer = await admin.post("/core/rolebindings", json=binding(name, [user], [name]))
    assert answer.status_code == 200


def binding(name: str, users: list[str], roles: list[str]) -> dict[str, Any]:
    return {
        "api": "core",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "users": users,
        "roles": roles,
    }


def cluster(name: str, namespace: str, token: str = "secret-token") -> dict[str, Any]:
    kubeconfig = copy.deepcopy(KUBECONFIG)
    kubeconfig["users"][0]["user"] = {"token": token}
    return {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {"kubeconfig": kubeconfig, "metrics": []},
    }


def application(name: str, namespace: str) -> dict[str, Any]:
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}]
    return {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"manifest": manifest},
    }


async def pages_of(
    http: httpx.AsyncClient, path: str, most: int
) -> AsyncIterator[tuple[dict[str, Any], str]]:
    """Each page of the list at ``path``, one item a page (``most`` pages at the most),
    with the decoded ``continue`` token that follows it ("" after the last)."""
    token: str | None = None
    for _ in range(most):
        query = "?limit=1" + (f"&continue={token}" if token else "")
        page = (await http.get(f"{path}{query}")).json()
        token = page["metadata"].get("continue")
        padded = (token or "") + "=" * (-len(token or "") % 4)
        yield page, base64.urlsafe_b64decode(padded).decode(errors="replace")
        if not token:
            return


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@dataclass
class Secured:
    server: ApiServer
    clients: dict[str, httpx.AsyncClient]
    anonymous: httpx.AsyncClient
    db: Path

    def __getitem__(self, user: str) -> httpx.AsyncClient:
        return self.clients[user]


def security(tmp_path: Path, **changes: Any) -> Security:
    key_file = tmp_path / "secrets.key"
    key_file.write_text(new_key() + "\n")
    settings: dict[str, Any] = {
        "allow_anonymous": False,
        "token_file": token_file(tmp_path / "tokens.csv"),
        "authorization": "RBAC",
        "secrets_key_file": key_file,
        "audit": str(tmp_path / "audit.jsonl"),
    }
    settings.update(changes)
    return Security(**settings)


@contextlib.asynccontextmanager
async def secured_admin(
    tmp_path: Path, timeout: float = 5.0, **changes: Any
) -> AsyncIterator[tuple[ApiServer, httpx.AsyncClient]]:
    """An API on a fresh store, secured as shipped but for ``changes``; the administrator's
    client of it (``timeout``: its request timeout)."""
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path, **changes)
    )
    try:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"authorization": "Bearer admin-token"}, timeout=timeout
        ) as admin:
            yield server, admin
    finally:
        await server.stop()


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    db = tmp_path / "shoal.db"
    server = await start_api(f"sqlite://{db}", security=security(tmp_path))
    clients = {
        user: httpx.AsyncClient(
            base_url=server.url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )
        for user, token in TOKENS.items()
    }
    anonymous = httpx.AsyncClient(base_url=server.url, timeout=30)
    admin = clients["admin"]
    for namespace, user in (("a", "alice"), ("b", "bob")):
        assert (await admin.post("/core/roles", json=tenant_role(namespace))).status_code == 200
        body = binding(f"tenant-{namespace}", [user], [f"tenant-{namespace}"])
        assert (await admin.post("/core/rolebindings", json=body)).status_code == 200

    async def bound() -> bool:
        answer = await clients["bob"].get("/kubernetes/namespaces/b/applications")
        return answer.status_code == 200

    await eventually(bound)
    try:
        yield Secured(server, clients, anonymous, db)
    finally:
        for client in (*clients.values(), anonymous):
            await client.aclose()
        await server.stop()
