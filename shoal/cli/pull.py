"""Pull clusters: ``shoal kube cluster join-token create`` on the hub, ``shoal join`` on the member.

    shoal kube cluster join-token create --ttl 1h -n default
    shoal join --api https://hub:8080 --token abcdef.0123456789abcdef \\
        --ca-hash sha256:... --kubeconfig member.yaml --name edge-7 -l location=DE

A token registers one cluster, once, before it expires; ``shoal join`` pins the API's
CA by its hash, exchanges the token for the cluster's own credential, keeps it under
``--state-dir`` and runs the cluster's agent (docs/pull-mode.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli.commands import KIND_GROUPS
from shoal.cli.config import api_url, credentials, run
from shoal.cli.errors import CliError
from shoal.cli.params import namespace_option
from shoal.model.kubernetes import Cluster

clusters = KIND_GROUPS[Cluster]
join_tokens = typer.Typer(help="Bootstrap tokens that join one pull cluster each.")
clusters.add_typer(join_tokens, name="join-token")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1h``, ``2d`` in seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise CliError(f"--ttl {text!r}: a duration such as 30m, 1h or 3600")
    return float(match.group(1)) * _UNIT[match.group(2)]


def ca_hash_of_config() -> str | None:
    """The hash of the CA this CLI trusts (its config's ``ca``), for the join line."""
    ca = credentials().ca
    if not ca or not Path(ca).exists():
        return None
    from shoal.machinery.tls import ca_hash

    return ca_hash(Path(ca).read_bytes())


@join_tokens.command("create")
def create_token(
    ctx: typer.Context,
    ttl: Annotated[str, typer.Option("--ttl", help="How long it may be used: 30m, 1h…")] = "1h",
    namespace: str = namespace_option(help="The namespace its cluster joins."),
    print_join_command: Annotated[
        bool,
        typer.Option("--print-join-command", help="Print the shoal join line alone (kubeadm's)"),
    ] = False,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="The one name it joins: a new agent for that pull cluster (its old "
            "credentials are revoked, what runs there is kept)",
        ),
    ] = None,
) -> None:
    """Print a token that joins one pull cluster, once, and the command line to join."""
    body: dict[str, Any] = {"ttl": seconds(ttl)}
    if cluster is not None:
        body["cluster"] = cluster

    async def work(client: Any) -> Any:
        return await client.request(
            "POST", f"/kubernetes/namespaces/{namespace}/jointokens", body=body
        )

    made = run(ctx, work)
    url = api_url(ctx)
    pin = ca_hash_of_config() or "sha256:<the hash shoal up prints>"
    line = f"shoal join --api {url} --token {made['token']} --ca-hash {pin}"
    if cluster is not None:
        line += f" --name {cluster}"
    if print_join_command:
        typer.echo(line)  # the member's own flags follow: --kubeconfig FILE --name NAME
        return
    typer.echo(made["token"])
    typer.echo(f"# valid until {made['expires']}, for one cluster in namespace {namespace}; "
               "join with:", err=True)  # fmt: skip
    typer.echo(f"#   {line} --kubeconfig FILE{'' if cluster else ' --name NAME'}", err=True)


@clusters.command("revoke")
def revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The pull cluster")],
    namespace: str = namespace_option(help="The cluster's namespace."),
) -> None:
    """Revoke every credential of a pull cluster's agent: they read and write nothing more.

    For a stolen credential; what runs on the cluster stays. A new join token made for the
    cluster (join-token create --cluster NAME) joins a new agent to it."""

    async def work(client: Any) -> Any:
        return await client.request(
            "DELETE", f"/kubernetes/namespaces/{namespace}/clusters/{name}/credential"
        )

    answer = run(ctx, work)
    typer.echo(f"cluster {namespace}/{name}: every credential issued before is revoked "
               f"(generation {answer['generation']}); join it again with a token made by "
               f"shoal kube cluster join-token create --cluster {name} -n {namespace}")  # fmt: skip


def _labels(values: list[str]) -> dict[str, str]:
    labels = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise CliError(f"-l {value!r}: a label reads key=value")
        labels[key] = text
    return labels


def join(
    api: Annotated[str, typer.Option("--api", help="The hub's API (https://)")],
    name: Annotated[str, typer.Option("--name", help="This cluster's name on the hub")],
    token: Annotated[
        str | None, typer.Option("--token", help="Join token (not needed once joined)")
    ] = None,
    ca_hash: Annotated[
        str | None,
        typer.Option("--ca-hash", help="sha256:<hex> of the API's CA (shoal up prints it)"),
    ] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="The member cluster (default: in-cluster)")
    ] = None,
    in_cluster: Annotated[
        bool, typer.Option("--in-cluster", help="The pod's service account")
    ] = False,
    label: Annotated[list[str] | None, typer.Option("-l", "--label", help="key=value")] = None,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where the cluster's credential is kept")
    ] = Path("shoal-join"),
    every: Annotated[
        float, typer.Option("--every", min=0.1, help="Seconds between status writes (lease)")
    ] = 10.0,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Join the hub in pull mode with a token and run this cluster's agent."""
    from shoal.system.join import CannotJoin, Join, member_kubeconfig, run_join

    if kubeconfig is not None and in_cluster:
        raise CliError("give --kubeconfig FILE or --in-cluster, not both")
    try:
        member = member_kubeconfig(kubeconfig)
        settings = Join(api, name, state_dir, member, token=token, ca_hash=ca_hash,
                        labels=_labels(label or []), every=every)  # fmt: skip
        run_join(settings, log_level)
    except CannotJoin as error:
        raise CliError(str(error)) from None


def register(app: typer.Typer) -> None:
    app.command("join")(join)
