"""`shoal sim`: serve simulated clusters, and inject faults into a running sim."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.machinery.files import write_atomically
from shoal.machinery.memory import tune_gc

app = typer.Typer(help="Simulated Kubernetes clusters (like KWOK) for demos, tests and benchmarks.")

ADMIN_FILE = "sim.url"
"""Where ``shoal up`` writes the URL of its simulator, in its data directory."""
ENV_ADMIN = "SHOAL_SIM"
DEFAULT_ADMIN = "http://127.0.0.1:8443"
TOKEN_FILE = "sim.token"
"""Where ``shoal up`` keeps its simulator's admin token (0600), beside ``sim.url``."""
ENV_TOKEN = "SHOAL_SIM_TOKEN"
"""The admin token, for ``shoal sim`` serving and for the commands that call it."""


def write_admin_url(data_dir: Path, url: str) -> None:
    write_atomically(data_dir / ADMIN_FILE, url + "\n")


def read_admin_url(data_dir: Path) -> str | None:
    try:
        return (data_dir / ADMIN_FILE).read_text().strip() or None
    except OSError:
        return None


def write_admin_token(data_dir: Path, token: str) -> None:
    write_atomically(data_dir / TOKEN_FILE, token + "\n", private=True)


def read_admin_token(data_dir: Path) -> str | None:
    try:
        return (data_dir / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def admin_token(token: str | None, data_dir: Path) -> str | None:
    """``--token``, else $SHOAL_SIM_TOKEN, else the token ``shoal up`` left in its data
    directory."""
    return token or os.environ.get(ENV_TOKEN) or read_admin_token(data_dir)


def admin_url(admin: str | None, data_dir: Path) -> str:
    """``--admin``, else $SHOAL_SIM, else the URL ``shoal up`` left in its data directory."""
    return admin or os.environ.get(ENV_ADMIN) or read_admin_url(data_dir) or DEFAULT_ADMIN


AdminOption = Annotated[
    str | None,
    typer.Option(
        help="Base URL of the sim server (default: $SHOAL_SIM, else the one `shoal up` "
        f"wrote in DATA_DIR/{ADMIN_FILE}, else {DEFAULT_ADMIN})."
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help=f"The sim's admin token (default: ${ENV_TOKEN}, else the one `shoal up` wrote "
        f"in DATA_DIR/{TOKEN_FILE}).",
    ),
]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="Data directory of `shoal up`.")
]


@dataclass(frozen=True)
class AdminAnswer:
    """What the sim's admin API answered: the status and the body as text."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def _admin_request(
    method: str,
    url: str,
    token: str | None,
    *,
    params: dict[str, str] | None = None,
    json_body: Any = None,
) -> AdminAnswer:
    """One admin request with the standard library (the command sends one or two: no client
    library to import); no answer is one line naming the URL and how to choose another."""
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = None if json_body is None else json.dumps(json_body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return AdminAnswer(answer.status, answer.read().decode())
    except urllib.error.HTTPError as error:
        return AdminAnswer(error.code, error.read().decode(errors="replace"))
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        typer.echo(
            f"cannot reach the sim admin API at {url} ({type(reason).__name__}); "
            "start `shoal up` or `shoal sim`, or give --admin URL",
            err=True,
        )
        raise typer.Exit(2) from None


def _labels(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    clusters: Annotated[int, typer.Option(help="Number of clusters.")] = 3,
    nodes: Annotated[int, typer.Option(help="Nodes per cluster.")] = 20,
    out: Annotated[Path, typer.Option(help="Directory for {name}.yaml kubeconfigs.")] = Path(
        "kubeconfigs"),
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0: any free port).")] = 8443,
    name_prefix: Annotated[str, typer.Option(help="Cluster names are PREFIX0, PREFIX1…")] = "sim-",
    pod_start_delay: Annotated[float, typer.Option(help="Seconds before a pod runs.")] = 0.5,
    job_duration: Annotated[float, typer.Option(help="Seconds a Job pod runs.")] = 1.0,
    cpu: Annotated[str, typer.Option(help="CPU capacity of each node.")] = "8",
    memory: Annotated[str, typer.Option(help="Memory capacity of each node.")] = "32Gi",
    label: Annotated[list[str] | None, typer.Option(
        "--label", "-l", help="Extra node label KEY=VALUE (repeatable).")] = None,
    tls: Annotated[Path | None, typer.Option(
        "--tls", help="Serve HTTPS: a directory of `shoal certs dev` (ca.crt, sim.crt, sim.key)."
    )] = None,
    mixed: Annotated[bool, typer.Option(
        "--mixed", help="Nodes of mixed sizes (2-32 cpu), one in ten tainted, each cluster at "
        "a geo site (labels geo, shoal.dev/lat-long): a fleet for fleet pods.")] = False,
    system_pods: Annotated[bool, typer.Option(
        "--system-pods", help="Each cluster runs kube-system's pods as a fresh one does "
        "(coredns, kube-proxy on every node, the control plane's pods).")] = False,
) -> None:
    """Serve simulated clusters until interrupted.

    The admin API takes the token in $SHOAL_SIM_TOKEN, else a new one written in
    OUT/sim.token (0600)."""
    if ctx.invoked_subcommand is not None:
        return
    from shoal.sim.server import new_admin_token, start_sim

    token = os.environ.get(ENV_TOKEN)
    if not token:
        token = new_admin_token()
        out.mkdir(parents=True, exist_ok=True)
        write_admin_token(out, token)

    sim_tls, ca_pem = None, None
    if tls is not None:
        from shoal.machinery.tls import Tls

        sim_tls, ca_pem = Tls(tls / "sim.crt", tls / "sim.key"), (tls / "ca.crt").read_bytes()

    async def run() -> None:
        sim = await start_sim(
            host=host, port=port, clusters=clusters, nodes=nodes, name_prefix=name_prefix,
            node_labels=_labels(label), cpu=cpu, memory=memory,
            pod_start_delay=pod_start_delay, job_duration=job_duration, out_dir=out,
            tls=sim_tls, ca=ca_pem, mixed=mixed, admin_token=token, system_pods=system_pods,
        )
        typer.echo(f"shoal sim serving {clusters} cluster(s) x {nodes} node(s) at {sim.url}")
        where = f"${ENV_TOKEN}" if os.environ.get(ENV_TOKEN) else str(out / TOKEN_FILE)
        typer.echo(f"admin API: {sim.url}/admin/clusters (its token: {where})")
        for name in sim.clusters.clusters:
            typer.echo(f"  {name}: kubectl --kubeconfig {out / (name + '.yaml')} get nodes")
        try:
            await asyncio.Event().wait()
        finally:
            await sim.stop()

    import uvloop  # as every Shoal server: the loop's own work in C

    tune_gc()
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(run())


@app.command()
def fault(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    admin: AdminOption = None,
    data_dir: DataDirOption = Path("data"),
    token: TokenOption = None,
    unreachable: Annotated[bool, typer.Option("--unreachable", help="Drop all connections.")
                           ] = False,
    reachable: Annotated[bool, typer.Option("--reachable", help="Serve again.")] = False,
    latency: Annotated[float | None, typer.Option(
        "--latency", min=0, help="Seconds before each Kubernetes API answer (0: none).")] = None,
    node: Annotated[str | None, typer.Option("--node", help="Node to act on.")] = None,
    not_ready: Annotated[bool, typer.Option("--not-ready", help="Node NotReady.")] = False,
    ready: Annotated[bool, typer.Option("--ready", help="Node Ready again.")] = False,
    memory_pressure: Annotated[bool, typer.Option("--memory-pressure",
                                                  help="Node MemoryPressure.")] = False,
    no_memory_pressure: Annotated[bool, typer.Option("--no-memory-pressure",
                                                     help="Clear MemoryPressure.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the node.")] = False,
    restore: Annotated[bool, typer.Option("--restore", help="Bring a removed node back.")
                       ] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Clear all faults (of --node).")
                     ] = False,
) -> None:
    """Inject or clear a fault in a running sim; prints the cluster's faults."""
    base = admin_url(admin, data_dir).rstrip("/") + f"/admin/clusters/{cluster}/faults"
    body: dict[str, Any] = {}
    if unreachable or reachable:
        body["unreachable"] = unreachable and not reachable
    if latency is not None:
        body["latency"] = latency
    if node:
        body["node"] = node
        if not_ready or ready:
            body["not_ready"] = not_ready and not ready
        if memory_pressure or no_memory_pressure:
            body["memory_pressure"] = memory_pressure and not no_memory_pressure
        if remove or restore:
            body["removed"] = remove and not restore
    elif any((not_ready, ready, memory_pressure, no_memory_pressure, remove, restore)):
        raise typer.BadParameter("node faults need --node")
    key = admin_token(token, data_dir)
    if clear:
        resp = _admin_request("DELETE", base, key, params={"node": node} if node else None)
    elif body:
        resp = _admin_request("POST", base, key, json_body=body)
    else:
        resp = _admin_request("GET", base, key)
    if resp.status_code >= 400:
        typer.echo(_error_line(resp), err=True)
        raise typer.Exit(1)
    typer.echo(resp.text)


def _error_line(resp: AdminAnswer) -> str:
    """One line: the Kubernetes Status message (or the body's first line), not the JSON."""
    try:
        message = resp.json().get("message")
    except ValueError:
        message = None
    text = message or (resp.text.strip().splitlines() or [""])[0]
    return f"error {resp.status_code}: {text}"


@app.command("list")
def list_clusters(
    admin: AdminOption = None, data_dir: DataDirOption = Path("data"), token: TokenOption = None
) -> None:
    """List the clusters of a running sim with node counts and faults."""
    resp = _admin_request("GET", admin_url(admin, data_dir).rstrip("/") + "/admin/clusters",
                          admin_token(token, data_dir))  # fmt: skip
    if resp.status_code >= 400:
        typer.echo(_error_line(resp), err=True)
        raise typer.Exit(1)
    for c in resp.json()["clusters"]:
        typer.echo(f"{c['name']}\tnodes={c['nodes']}\tready={c['ready_nodes']}\t"
                   f"pods={c['pods']}\tfaults={faults_text(c['faults'])}")


def faults_text(faults: dict[str, Any]) -> str:
    """A cluster's faults (``GET /admin/clusters``) in a word each, ``none`` without any:
    ``unreachable,latency=0.5s,n-3:not_ready+memory_pressure``."""
    words = ["unreachable"] if faults.get("unreachable") else []
    if faults.get("latency"):
        words.append(f"latency={faults['latency']:g}s")
    for node, fault in sorted((faults.get("nodes") or {}).items()):
        words.append(f"{node}:" + "+".join(sorted(fault)))
    return ",".join(words) or "none"
