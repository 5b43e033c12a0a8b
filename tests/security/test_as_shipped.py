"""What a tenant does with the ``shoal`` CLI under ``shoal up``'s security: the API as it
ships (tokens, RBAC, sealed secrets, no anonymous), every component on its own identity,
alice with a namespaced role and her own token, a ``shoal sim`` cluster of hers.

Each step is a verb a tenant uses, called as she would (her CLI configuration holds the
API's URL and her token), and checked on what it did: the member cluster, the
application's status, the answer another tenant gets.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from shoal.api.server import ApiServer
from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ApiError, ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.sim.server import SimServer
from shoal.system import components
from shoal.testing import shipped
from shoal.testing.wait import wait_for
from tests.cli.conftest import invoke
from tests.conftest import Tenant
from tests.scheduler.helpers import fast_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "a"
MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1"}]}
"""


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """Two clusters for the tenants' applications."""
    return dict(clusters=["c1", "c2"], nodes=2, pod_start_delay=0.2)


@pytest.fixture
async def every_component(
    api: ApiServer, client_of: shipped.Callers
) -> AsyncIterator[None]:
    """The scheduler and every controller as ``shoal up`` starts them, each as itself."""
    running: list[Any] = [components.scheduler(client_of(components.SCHEDULER), fast_config())]
    running += [c.build(client_of(c.name)) for c in components.CONTROLLERS]
    for part in running:
        await part.start()
    try:
        yield None
    finally:
        for part in reversed(running):
            await part.stop()


def role(
    name: str, api: str, resources: list[str], namespaces: list[str], verbs: list[Any]
) -> Role:
    rule = RoleRule(api=api, resources=resources, namespaces=namespaces, verbs=verbs)
    return Role(metadata=Metadata(name=name), rules=[rule])


def cli_config(directory: Path, url: str, user: str) -> Path:
    """What an administrator hands a tenant: the API's URL and her token."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump({"api": url, "token": shipped.token(user)}))
    return path


async def as_user(
    monkeypatch: pytest.MonkeyPatch, config: Path, *args: str
) -> Result:
    monkeypatch.setenv("SHOAL_CONFIG", str(config))
    result: Result = await invoke(*args)
    return result


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result.output


async def test_a_tenant_runs_an_application_with_the_cli(
    api: ApiServer,
    client: ShoalClient,
    tenant: Tenant,
    sim: SimServer,
    every_component: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    alice = await tenant("alice", NS)
    await tenant("bob", "b")
    mine = cli_config(tmp_path / "alice", api.url, "alice")
    bobs = cli_config(tmp_path / "bob", api.url, "bob")

    async def shoal(*args: str) -> Result:
        return await as_user(monkeypatch, mine, *args)

    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST)
    for name, location in (("c1", "DE"), ("c2", "FR")):
        kubeconfig = tmp_path / f"{name}.yaml"
        kubeconfig.write_text(yaml.safe_dump(sim.clusters.kubeconfig(name)))
        ok(await shoal("kube", "cluster", "register", name, "-n", NS, "-l",
                       f"location={location}", "--kubeconfig", str(kubeconfig)))  # fmt: skip

    async def online() -> bool:
        found = (await alice.list(Cluster, NS)).items
        return len(found) == 2 and all(c.status.state.value == "ONLINE" for c in found)

    await wait_for(online, timeout=30, message="alice's clusters ONLINE (the observer as itself)")

    # dry run: where it would go, nothing made
    planned = json.loads(ok(await shoal("kube", "app", "dryrun", "-n", NS, "-f", str(manifest),
                                         "-L", "location is DE", "-o", "json")))  # fmt: skip
    assert planned["chosen"] == "c1", planned
    assert (await alice.list(Application, NS)).items == []

    ok(await shoal("kube", "app", "create", "web", "-n", NS, "-f", str(manifest),
                   "-L", "location is DE"))  # fmt: skip

    clients = KubeClients(timeout=2.0)
    try:
        member: dict[str, KubeCluster] = {
            c.metadata.name: await clients.get(c) for c in (await client.list(Cluster, NS)).items
        }
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
        kube_ns = "default"  # web names no namespace: its kubeconfig context's, which is none

        async def running_on_c1() -> bool:
            app = await alice.get(Application, "web", NS)
            deployed = await member["c1"].read(ref, kube_ns)
            return app.status.state is ApplicationState.RUNNING and deployed is not None

        await wait_for(running_on_c1, timeout=30, message="web RUNNING on c1")

        listed = ok(await shoal("kube", "app", "list", "-n", NS))
        assert "web" in listed and "RUNNING" in listed
        described = ok(await shoal("kube", "app", "describe", "web", "-n", NS))
        assert "c1" in described
        explained = json.loads(ok(await shoal("kube", "app", "explain", "web", "-n", NS,
                                              "-o", "json")))  # fmt: skip
        assert explained["chosen"] == "c1", explained

        async def told() -> str | None:
            out = ok(await shoal("get", "events", "-n", NS, "--for", "app/web"))
            return out if "Scheduled" in out else None

        await wait_for(told, timeout=15, message="web's Scheduled event, read by alice")

        cluster_page = ok(await shoal("kube", "cluster", "describe", "c1", "-n", NS))
        assert "web" in cluster_page

        # another tenant sees nothing of it, and may not touch it
        peek = await as_user(monkeypatch, bobs, "kube", "app", "get", "web", "-n", NS)
        assert peek.exit_code != 0 and "c1" not in peek.output
        gone = await as_user(monkeypatch, bobs, "kube", "app", "delete", "web", "-n", NS)
        assert gone.exit_code != 0
        assert (await alice.get(Application, "web", NS)).metadata.name == "web"

        # maintenance in her own namespace: cordon c1, reschedule; it moves to c2. A
        # RescheduleTask is cluster-wide and acts for its requester (docs/security.md): the
        # administrator lets her create them, and it reaches only what she may update.
        await client.create(role("reschedulers", "scheduling", ["rescheduletasks"], [""],
                                 ["create", "get", "list", "watch"]))  # fmt: skip
        await client.create(
            RoleBinding(metadata=Metadata(name="alice-reschedules"), users=["alice"],
                        roles=["reschedulers"])
        )  # fmt: skip
        ok(await shoal("kube", "app", "update", "web", "-n", NS, "-L",
                       "location in (DE, FR)"))  # fmt: skip
        ok(await shoal("kube", "cluster", "cordon", "c1", "-n", NS))
        ok(await shoal("reschedule", "app", "web", "-n", NS, "--name", "move", "--wait",
                       "--timeout", "60"))  # fmt: skip

        async def moved() -> bool:
            app = await alice.get(Application, "web", NS)
            there = await member["c2"].read(ref, kube_ns)
            return (
                app.status.running_on is not None
                and app.status.running_on.name == "c2"
                and there is not None
                and await member["c1"].read(ref, kube_ns) is None
            )

        await wait_for(moved, timeout=60, message="web moved to c2 after the cordon")
        ok(await shoal("kube", "cluster", "uncordon", "c1", "-n", NS))

        ok(await shoal("kube", "app", "delete", "web", "-n", NS))

        async def removed() -> bool:
            left = (await alice.list(Application, NS)).items
            return left == [] and await member["c2"].read(ref, kube_ns) is None

        await wait_for(removed, timeout=30, message="web deleted, and from c2")
    finally:
        await clients.close()


async def test_the_default_fixtures_are_secured_as_shoal_up_ships(
    api: ApiServer, client: ShoalClient, client_of: shipped.Callers
) -> None:
    """The suite's API refuses anonymous callers, ``client`` is the administrator and a
    component has only its own role: what passes elsewhere passes as shipped."""
    import httpx

    apps = "/kubernetes/namespaces/default/applications"
    async with httpx.AsyncClient(base_url=api.url) as anonymous:
        refused = await anonymous.get(apps)
        assert refused.status_code == 401, refused.text
    assert (await client.request("GET", "/core/roles"))["items"]  # shoal up's default roles
    body = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"manifest": [yaml.safe_load(MANIFEST)]},
    }
    app = await client.create(Application.model_validate(body))
    scheduler = client_of(components.SCHEDULER)
    seen = await scheduler.get(Application, "web", "default")  # it reads applications
    assert seen.metadata.uid == app.metadata.uid
    with pytest.raises(ApiError) as denied:
        await scheduler.delete(Application, "web", "default")  # it never deletes them
    assert denied.value.status == 403
