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
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from shoal.api.auth import bootstrap
from shoal.api.auth.config import Security
from shoal.client.rest import ShoalClient

ADMIN = bootstrap.ADMIN


@functools.cache
def setup() -> bootstrap.Setup:
    """``shoal up``'s security set-up, made once per process and removed at its exit."""
    directory = Path(tempfile.mkdtemp(prefix="shoal-shipped-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return bootstrap.ensure(directory, tls=False)


def security() -> Security:
    """What ``shoal up`` gives its API: static tokens, RBAC, sealed secrets, no anonymous."""
    return setup().security


def token(user: str) -> str:
    """The token ``shoal up`` gives ``user``: ``admin`` or a component (``kube-controller``)."""
    made = setup()
    return made.tokens[ADMIN] if user == ADMIN else made.token_of(user)


@functools.cache
def api_config() -> Path:
    """The ``api.yaml`` ``shoal up --no-tls`` starts ``shoal api --config`` with."""
    from shoal.system.processes import plain_api_config

    return plain_api_config(setup().directory)


def client_config(directory: Path, url: str) -> Path:
    """The CLI configuration ``shoal up`` writes (the API's URL, the admin's token), in
    ``directory`` rather than beside the shared keys."""
    import dataclasses

    return dataclasses.replace(setup(), directory=directory).write_client_config(url)


def client(url: str, user: str = ADMIN, **options: Any) -> ShoalClient:
    """A client of ``url`` as ``user`` (``admin`` or a component), with ``shoal up``'s token."""
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
