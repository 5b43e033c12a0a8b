"""The security ``shoal up`` ships, for tests and benches: made by ``shoal up``'s own set-up.

``setup()`` runs ``shoal.api.auth.bootstrap.ensure`` once per process, in a temporary
directory, with plain HTTP as ``shoal up --no-tls`` on loopback: a token for the
administrator and for each component, RBAC with the roles the API creates at its first
start, the key that encrypts secrets, the audit log, anonymous refused. Every API a test
starts reuses it (the keys are made once: about 25 ms), so tests run with the rights
each caller has in production: the administrator's, a component's (``system:<name>``),
or a tenant's bound to a namespaced role.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from shoal.api.auth import bootstrap
from shoal.api.auth.config import Security
from shoal.client.rest import ApiError, Conflict, ShoalClient
from shoal.machinery.files import write_atomically
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.model.kubernetes import Application
from shoal.testing.wait import wait_for

ADMIN = bootstrap.ADMIN


TENANTS = ("alice", "bob")
"""Users an administrator added to ``tokens.csv``; ``grant_namespace`` gives them a role."""


@functools.cache
def setup() -> bootstrap.Setup:
    """``shoal up``'s security set-up, made once per process and removed at its exit, with
    a token for each of ``TENANTS`` added as an administrator adds users (a line each in
    ``tokens.csv``, which the API reads again when it changes)."""
    directory = Path(tempfile.mkdtemp(prefix="shoal-shipped-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    made = bootstrap.ensure(directory, tls=False)
    tokens = made.directory / "tokens.csv"
    users = "".join(f'{secrets.token_urlsafe(32)},{u},{u},""\n' for u in TENANTS)
    write_atomically(tokens, tokens.read_text() + users, private=True)
    return bootstrap.ensure(directory, tls=False)  # reads the tokens back


def security() -> Security:
    """What ``shoal up`` gives its API: static tokens, RBAC, sealed secrets, no anonymous."""
    return setup().security


def token(user: str) -> str:
    """The token of ``user``: ``admin``, a tenant of ``TENANTS``, or a component
    (``kube-controller``: the token ``shoal up`` gives ``system:kube-controller``)."""
    made = setup()
    return made.tokens[user] if user == ADMIN or user in TENANTS else made.token_of(user)


def tenant_role(namespace: str) -> Role:
    """Every verb on every kind of ``namespace`` but reading secrets in clear: what an
    administrator gives a team."""
    verbs = ["get", "list", "watch", "create", "update", "delete"]
    rule = RoleRule(api="*", resources=["*"], namespaces=[namespace], verbs=verbs)
    return Role(metadata=Metadata(name=f"tenant-{namespace}"), rules=[rule])


async def grant_namespace(admin: ShoalClient, user: str, namespace: str) -> ShoalClient:
    """Bind ``user`` to ``tenant_role(namespace)`` (made if missing), wait until the API
    applies it, and return a client of ``user``: close it after."""
    role = tenant_role(namespace)
    with contextlib.suppress(Conflict):
        await admin.create(role)
    name = f"{role.metadata.name}-{user}"
    binding = RoleBinding(metadata=Metadata(name=name), users=[user], roles=[role.metadata.name])
    await admin.create(binding)
    tenant = client(admin.url, user)

    async def applied() -> bool:
        try:
            await tenant.list(Application, namespace)
        except ApiError as error:
            if error.status != 403:
                raise
            return False
        return True

    await wait_for(applied, timeout=10, message=f"{user}'s role on {namespace!r} applied")
    return tenant


@functools.cache
def api_config() -> Path:
    """The ``api.yaml`` ``shoal up --no-tls`` starts ``shoal api --config`` with."""
    from shoal.system.processes import plain_api_config

    return plain_api_config(setup().directory)


def client_config(directory: Path, url: str) -> Path:
    """The CLI configuration ``shoal up`` writes (the API's URL, the admin's token), in
    ``directory`` rather than beside the shared keys."""
    import dataclasses

    directory.mkdir(parents=True, exist_ok=True)
    return dataclasses.replace(setup(), directory=directory).write_client_config(url)


def client(url: str, user: str = ADMIN, **options: Any) -> ShoalClient:
    """A client of ``url`` as ``user`` (``admin``, a tenant or a component) with its token."""
    return ShoalClient(url, token=token(user), **options)


class Callers:
    """A client per identity on one API, made on first use and closed together."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: dict[str, ShoalClient] = {}

    def __call__(self, user: str) -> ShoalClient:
        if user not in self.made:
            self.made[user] = client(self.url, user)
        return self.made[user]

    async def close(self) -> None:
        for each in self.made.values():
            await each.close()
        self.made.clear()
