"""``shoal certs`` (a CA and certificates for a development set-up) and ``shoal secrets``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

certs = typer.Typer(help="Make a CA and component certificates for a development set-up.")
secrets = typer.Typer(help="Keys that encrypt secret fields at rest.")

DirOption = Annotated[Path, typer.Option("--dir", help="Where the CA and certificates are")]


@certs.command("ca")
def make_ca_command(directory: DirOption = Path("pki"), name: str = "shoal-ca") -> None:
    """Make a CA (ca.key, ca.crt) in --dir."""
    from shoal.machinery.tls import make_ca, write_pair

    if (directory / "ca.crt").exists():
        raise typer.BadParameter(f"{directory / 'ca.crt'} exists; remove it to make a new CA")
    key, cert = write_pair(directory, "ca", make_ca(name))
    typer.echo(f"CA: {cert} (key {key})")


@certs.command("issue")
def issue_command(
    name: Annotated[str, typer.Argument(help="Certificate name: the user (CN) of a client")],
    directory: DirOption = Path("pki"),
    group: Annotated[list[str], typer.Option("--group", help="Group (O); repeat")] = [],  # noqa: B006
    host: Annotated[list[str], typer.Option("--host", help="Server name or IP; repeat")] = [],  # noqa: B006
    days: int = 365,
) -> None:
    """Sign a certificate for a server (--host) or a client (CN user, O groups) with --dir's CA."""
    from shoal.machinery.tls import issue, write_pair

    ca = (directory / "ca.key").read_bytes(), (directory / "ca.crt").read_bytes()
    pair = issue(*ca, name, tuple(group), tuple(host), days)
    key, cert = write_pair(directory, name.replace(":", "-"), pair)
    typer.echo(f"{name}: {cert} (key {key})")


@certs.command("dev")
def dev_command(directory: DirOption = Path("pki")) -> None:
    """A CA, server certificates for the API, sim and agents, a client certificate per component
    (CN system:<component>) and one for an admin (O shoal:admins)."""
    from shoal.system.security import dev_certificates

    dev_certificates(directory)
    typer.echo(f"CA and certificates in {directory}/ (ca.crt, api.crt, <component>.crt, admin.crt)")


@secrets.command("new-key")
def new_key_command() -> None:
    """Print a new key (base64 of 32 random bytes); put it first in the key file to rotate."""
    from shoal.system.security import new_key

    typer.echo(new_key())


@secrets.command("reencrypt")
def reencrypt_command(
    config: Annotated[Path, typer.Option("--config", help="The API's api.yaml (secrets key)")],
    store: Annotated[str | None, typer.Option("--store", help="Store URL")] = None,
) -> None:
    """Encrypt every secret field again with the first key of the key file (key rotation)."""
    from shoal.cli.config import resolve_store
    from shoal.system.security import NoSecretsKey, reencrypt

    try:
        count, key = reencrypt(resolve_store(store, Path("shoal.db")), config)
    except NoSecretsKey as error:
        raise typer.BadParameter(str(error)) from None
    typer.echo(f"re-encrypted {count} objects with key {key}")


def install(root: typer.Typer) -> None:
    root.add_typer(certs, name="certs")
    root.add_typer(secrets, name="secrets")
