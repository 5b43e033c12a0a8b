"""Security set-up an operator runs by hand (``shoal certs dev``, ``shoal secrets``): the
roles' users, the keys of secret fields and the store they seal, reached from here so that
the command line opens no store and names no API internals."""

from __future__ import annotations

import asyncio
from pathlib import Path


class NoSecretsKey(ValueError):
    """The API's configuration (and environment) names no key for secret fields."""


def dev_certificates(directory: Path) -> None:
    """A CA, server certificates for the API, sim and agents, a client certificate per
    component (CN ``system:<component>``) and one for an admin (O ``shoal:admins``)."""
    from shoal.api.auth.roles import ADMINS, COMPONENTS, component_user
    from shoal.machinery.tls import issue, make_ca, write_pair

    ca = make_ca()
    write_pair(directory, "ca", ca)
    for server in ("api", "sim", "agent"):
        pair = issue(*ca, f"shoal-{server}", hosts=("127.0.0.1", "localhost"))
        write_pair(directory, server, pair)
    for component in COMPONENTS:
        write_pair(directory, component, issue(*ca, component_user(component)))
    write_pair(directory, "admin", issue(*ca, "admin", (ADMINS,)))


def new_key() -> str:
    """A new key for secret fields (base64 of 32 random bytes)."""
    from shoal.api.auth.secrets import new_key as make

    return make()


def reencrypt(store_url: str, config: Path) -> tuple[int, str]:
    """Encrypt every secret field of the store at ``store_url`` again with the first key of
    the API's configuration ``config``: (objects rewritten, that key's id)."""
    from shoal.api.auth.config import load
    from shoal.api.auth.secrets import load_cipher
    from shoal.api.auth.store import reencrypt as rewrite
    from shoal.store.factory import open_store

    security = load(config)
    cipher = load_cipher(security.secrets_key_file, security.secrets_key_env)
    if cipher is None:
        raise NoSecretsKey("no secrets key in the configuration or the environment")

    async def main() -> int:
        opened = open_store(store_url)
        try:
            return await rewrite(opened, cipher)
        finally:
            await opened.close()

    return asyncio.run(main()), cipher.current
