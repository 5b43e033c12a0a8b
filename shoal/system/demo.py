"""The steps ``shoal up`` takes in either form (one process, or one per component): the
simulated clusters, sample metrics, the demo application and the banner."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from shoal.machinery.files import write_atomically
from shoal.system.process import console


def saved_token(kube_dir: Path, name: str) -> str | None:
    """The token of ``name``'s kubeconfig from an earlier run, so it stays valid."""
    try:
        config = yaml.safe_load((kube_dir / f"{name}.yaml").read_text())
        return str(config["users"][0]["user"]["token"])
    except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return None


def sim_admin_token(data_dir: Path) -> str:
    """The simulator's admin token: the one of an earlier run, else a new one, kept in
    ``DATA_DIR/sim.token`` (0600) for the sim provider and ``shoal sim fault``/``list``."""
    from shoal.sim.cli import read_admin_token, write_admin_token
    from shoal.sim.server import new_admin_token

    token = read_admin_token(data_dir)
    if token is None:
        token = new_admin_token()
        write_admin_token(data_dir, token)
    return token


def outbound_policy(data_dir: Path) -> Path:
    """The outbound policy of the processes ``shoal up`` runs (``DATA_DIR/outbound.yaml``,
    written with the defaults on the first start, an administrator's to edit): tenants'
    URLs reach no loopback, link-local or private address."""
    from shoal.machinery import outbound

    return outbound.write_default(data_dir / outbound.FILE_NAME)


def banner(setup: Any, url: str, data_dir: Path) -> None:
    """Where the credentials are, the dashboard, and a first command to try."""
    config = setup.write_client_config(url)
    console.print(
        f"\nCredentials: {config} (admin token, CA); the CLI reads it from this "
        f"directory, or anywhere with [bold]SHOAL_CONFIG={config}[/]"
    )
    console.print(f"Dashboard: [bold]{url}/ui/[/] (paste the admin token from {config})")
    from shoal.machinery.tls import ca_hash

    pin = ca_hash(Path(setup.ca).read_bytes())  # what shoal join pins (docs/pull-mode.md)
    if url.startswith("https://"):
        console.print(f"CA hash: [bold]{pin}[/] (shoal join --ca-hash; a token: shoal kube "
                      "cluster join-token create)")  # fmt: skip
    else:
        console.print(f"CA hash: {pin} (pull clusters join an https API: shoal up --tls)")
    shoal = _shoal_command()
    console.print(f"Try: [bold]SHOAL_API={url} {shoal} get applications[/]   (Ctrl-C stops)")
    if shoal != "shoal":
        console.print("     or put shoal on the PATH: [bold]source .venv/bin/activate[/]")


def _shoal_command() -> str:
    """``shoal`` when it is on the PATH, else the path of this one (``.venv/bin/shoal``)."""
    import shutil
    import sys

    here = Path(sys.executable).parent / "shoal"
    found = shutil.which("shoal")
    if found is not None and Path(found).resolve() == here.resolve():
        return "shoal"
    if here.exists():
        try:
            return str(here.relative_to(Path.cwd()))
        except ValueError:
            return str(here)
    return "shoal"


def previous_port(data_dir: Path) -> int:
    """The simulator's port of the last run, so that stored kubeconfigs stay valid; else a free
    one (kept for the whole run: a restarted simulator comes back on it). A new one lies
    below the kernel's ephemeral range: the simulator binds it only once started, and an
    outgoing connection could take a port of that range first."""
    from shoal.machinery.ports import free_ports, listenable
    from shoal.sim.cli import read_admin_url

    url = read_admin_url(data_dir)
    if url is not None:
        port = int(url.rsplit(":", 1)[1])
        if listenable(port):
            return port
    return free_ports(1)


async def start_sim_fleet(client: Any, data_dir: Path, count: int, nodes: int) -> tuple[Any, bool]:
    """Start the simulator in this process, then ``start_fleet`` (``--single-process``)."""
    from shoal.sim.cli import write_admin_url
    from shoal.sim.server import start_sim

    token = sim_admin_token(data_dir)
    sim = await start_sim(
        host="127.0.0.1", port=previous_port(data_dir), clusters=[], admin_token=token,
        system_pods=True,
    )
    write_admin_url(data_dir, sim.url)
    kube_dir = data_dir / "kubeconfigs"

    async def add(name: str, count: int, labels: dict[str, str]) -> dict[str, Any]:
        token = saved_token(kube_dir, name)
        sim.clusters.add_cluster(name, nodes=count, node_labels=labels, token=token)
        return dict(sim.clusters.kubeconfig(name))

    return sim, await start_fleet(client, data_dir, count, nodes, add, sim.url, token)


async def start_fleet(
    client: Any, data_dir: Path, count: int, nodes: int, add: Any, admin: str, admin_token: str
) -> bool:
    """Add ``count`` simulated clusters with ``add`` and register those not registered yet.

    Returns whether the clusters were registered before (a restart): their
    stored labels and metrics are kept, and shown.
    """
    import yaml

    from shoal.client.rest import NotFound
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import Cluster, ClusterSpec, MetricRef

    locations = ["DE", "FR", "FI", "NL", "IT"]
    table = Table("cluster", "labels", "metrics", "kubeconfig", title="Simulated clusters")
    kube_dir = data_dir / "kubeconfigs"
    kube_dir.mkdir(parents=True, exist_ok=True)
    restarted = False
    for i in range(count):
        name = f"sim-{i + 1}"
        location = locations[i % len(locations)]
        kubeconfig = await add(name, nodes, {"location": location})
        write_atomically(kube_dir / f"{name}.yaml", yaml.safe_dump(kubeconfig))
        metrics = [
            MetricRef(name="green_energy", weight=1.0),
            MetricRef(name=f"free_capacity_{i + 1}", weight=0.5),
        ]
        cluster = Cluster(
            metadata=Metadata(name=name, namespace="default", labels={"location": location}),
            spec=ClusterSpec(kubeconfig=kubeconfig, metrics=metrics),
        )
        try:
            stored = await client.get(Cluster, name, "default")
            restarted = True
            if stored.spec.kubeconfig != kubeconfig:
                stored.spec.kubeconfig = kubeconfig
                stored = await client.update(stored)
        except NotFound:
            stored = await client.create(cluster)
        labels = ", ".join(f"{k}={v}" for k, v in sorted(stored.metadata.labels.items()))
        table.add_row(
            name,
            labels or "-",
            ", ".join(m.name for m in stored.spec.metrics),
            str(kube_dir / f"{name}.yaml"),
        )
    console.print(table)
    console.print(f"[bold green]Simulator[/] admin API on {admin} (in {data_dir / 'sim.url'})")
    await sample_clouds(client, admin, admin_token)
    return restarted


async def sample_clouds(client: Any, admin: str, admin_token: str) -> None:
    """The ``sim`` infrastructure provider and two clouds it builds clusters on (DE, FR).

    ``shoal kube cluster create NAME -f docs/examples/cluster.tosca.yaml -L 'location is DE'``
    then builds a new simulated cluster (docs/clouds.md). The clouds are OpenStack
    clouds in Krake's terms; the sim provider does not use their Keystone login.
    """
    from shoal.client.rest import NotFound
    from shoal.infrastructure.sim import sample_objects
    from shoal.model.infrastructure import GlobalCloud, GlobalInfrastructureProvider

    metrics = {"DE": "green_energy", "FR": "free_capacity_2"}
    provider, clouds = sample_objects(admin, metrics, admin_token)
    try:
        stored = await client.get(GlobalInfrastructureProvider, "sim")
        if stored.spec != provider.spec:  # the simulator came back on another port or token
            stored.spec = provider.spec
            await client.update(stored)
    except NotFound:
        await client.create(provider)
    for cloud in clouds:
        try:
            stored_cloud = await client.get(GlobalCloud, cloud.metadata.name)
        except NotFound:
            await client.create(cloud)
            continue
        ref = stored_cloud.spec.openstack.infrastructure_provider
        if ref is not None and ref.url != provider.spec.sim.url:  # type: ignore[union-attr]
            await client.update(stored_cloud)  # the API records the provider's URL again
    console.print("[bold green]Clouds[/] cloud-de (location=DE), cloud-fr (location=FR): "
                  "clusters created on them are built by the sim provider")  # fmt: skip


async def _wait_online(client: Any, names: list[str], restarted: bool, timeout: float) -> None:
    """Wait until the clusters are ONLINE, saying once that they are coming back or connecting."""
    from shoal.model.kubernetes import Cluster, ClusterState

    said = False
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        listed = await client.list(Cluster, "default")
        waiting = sorted(
            c.metadata.name
            for c in listed.items
            if c.metadata.name in names and c.status.state is not ClusterState.ONLINE
        )
        if not waiting or asyncio.get_running_loop().time() > deadline:
            if waiting:
                console.print(f"clusters not ONLINE yet: {', '.join(waiting)}")
            return
        if not said:
            what = "coming back" if restarted else "connecting"
            console.print(f"clusters {what}: {', '.join(waiting)} …")
            said = True
        await asyncio.sleep(0.1)


async def sample_metrics(client: Any) -> None:
    """A static provider: the share of green energy, and free capacity per cluster.

    Higher is better for both: the score prefers high normalised values.
    """
    from shoal.client.rest import ApiError
    from shoal.model.base import Metadata
    from shoal.model.core import (
        GlobalMetric,
        GlobalMetricsProvider,
        MetricProviderRef,
        MetricSpec,
        MetricsProviderSpec,
        StaticSpec,
    )

    values = {"green_energy": 0.6}
    for i in range(1, 11):
        values[f"free_capacity_{i}"] = round((0.37 * i) % 1, 2)
    objects: list[Any] = [
        GlobalMetricsProvider(
            metadata=Metadata(name="sample"),
            spec=MetricsProviderSpec(type="static", static=StaticSpec(metrics=values)),
        )
    ]
    for name in values:
        objects.append(
            GlobalMetric(
                metadata=Metadata(name=name),
                spec=MetricSpec(
                    min=0, max=1, provider=MetricProviderRef(name="sample", metric=name)
                ),
            )
        )
    for obj in objects:
        with contextlib.suppress(ApiError):
            await client.create(obj)


async def create_demo(client: Any, clusters: list[str], restarted: bool) -> None:
    """Create a demo application (or find the stored one) and show where it is and why."""
    from shoal.client.rest import NotFound
    from shoal.model.base import Metadata
    from shoal.model.kubernetes import (
        Application,
        ApplicationSpec,
        ClusterConstraints,
        Constraints,
    )

    manifest = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "echo"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "echo"}},
                "template": {
                    "metadata": {"labels": {"app": "echo"}},
                    "spec": {"containers": [{"name": "echo", "image": "hashicorp/http-echo"}]},
                },
            },
        }
    ]
    app = Application(
        metadata=Metadata(name="demo", namespace="default"),
        spec=ApplicationSpec(
            manifest=manifest,
            constraints=Constraints(cluster=ClusterConstraints(labels=["location in (DE, FR)"])),
        ),
    )
    # Let the metric caches fetch the sample values first: wait until a dry run scores them.
    body = app.model_dump(mode="json")
    for _ in range(100):
        result = await client.request("POST", "/scheduling/namespaces/default/dryrun", body=body)
        ranking = result.get("ranking", [])
        if ranking and all(entry.get("metrics") for entry in ranking):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    await _wait_online(client, clusters, restarted, timeout=20)
    try:
        await client.get(Application, "demo", "default")
        stored = " (stored)"
    except NotFound:
        await client.create(app)
        stored = ""
    for _ in range(400):
        current = await client.get(Application, "demo", "default")
        if current.status.scheduled_to is not None:
            break
        await asyncio.sleep(0.05)
    target = current.status.scheduled_to.name if current.status.scheduled_to else "nowhere yet"
    constraint = ", ".join(current.spec.constraints.cluster.labels) or "none"
    console.print(
        f"\nApplication [bold]demo[/] (constraint: {constraint}) → [bold cyan]{target}[/]{stored}"
    )
    # The stored explanation may predate the restart, and keeps the score terms of the
    # chosen cluster only; a dry run of the stored application says how things are now.
    body = current.model_dump(mode="json", include={"api", "kind", "metadata", "spec"})
    detail = await client.request("POST", "/scheduling/namespaces/default/dryrun", body=body)
    console.print(f"  {detail.get('summary', '')}")
    table = Table("cluster", "score", "metrics", title="Ranking (shoal kube app dryrun)")
    for entry in detail.get("ranking", []):
        metrics = ", ".join(
            f"{m['name']}={m['value']:g} (w {m['weight']:g})" for m in entry.get("metrics", [])
        )
        table.add_row(entry["cluster"], f"{entry['score']:.3f}", metrics)
    console.print(table)
