"""Objects without ``metadata.namespace`` go to the kubeconfig context's namespace, as Krake
and kubectl place them; the namespace used is recorded and kept, so nothing moves."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeClients, KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.namespaces import kube_namespace
from shoal.copies.owners import ANNOTATION_APP, LABEL_NAMESPACE, Owner, owned, owner_of
from shoal.kube.controller import KubeController
from shoal.machinery.kubeconfig import context_namespace
from shoal.machinery.names import QUALIFIED_NAME
from shoal.model.base import Metadata, ResourceRef
from shoal.model.kubernetes import Application, ApplicationState, Cluster, ClusterSpec
from shoal.sim.server import SimServer
from shoal.testing import builders
from shoal.testing.builders import register
from shoal.testing.shipped import Callers
from tests.kube.conftest import deployment
from tests.util import kube_clients, started, until_gone, wait_for

pytestmark = [pytest.mark.integration]

KRAKE = "system:admin"


def with_context_namespace(kubeconfig: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    config = copy.deepcopy(kubeconfig)
    context = config["contexts"][0]["context"]
    context.pop("namespace", None)
    if namespace is not None:
        context["namespace"] = namespace
    return config


def test_the_context_namespace_is_the_current_contexts_else_default() -> None:
    config = {"current-context": "b", "contexts": [
        {"name": "a", "context": {"namespace": "ns-a"}},
        {"name": "b", "context": {"namespace": "ns-b"}},
    ]}  # fmt: skip
    assert context_namespace(config) == "ns-b"
    assert context_namespace({"contexts": [{"name": "a", "context": {}}]}) == "default"
    assert context_namespace({"contexts": [{"name": "a", "context": {"namespace": "x"}}]}) == "x"
    assert context_namespace(None) == "default"
    assert context_namespace({"contexts": [{"context": {"namespace": "../etc"}}]}) == "default"


def test_the_namespace_used_is_the_record_then_the_earlier_one_then_the_contexts() -> None:
    def app(namespace: str, status: dict[str, Any]) -> Application:
        return builders.app("w", namespace=namespace, manifest=[], status=status)

    def ref(namespace: str) -> ResourceRef:
        return ResourceRef(api="kubernetes", kind="Cluster", namespace=namespace, name="de")

    config = {"contexts": [{"name": "c", "context": {"namespace": "ctx"}}]}
    cluster = Cluster(metadata=Metadata(name="de", namespace="team"),
                      spec=ClusterSpec(kubeconfig=config))  # fmt: skip
    running = {"running_on": ref("team").model_dump()}
    assert kube_namespace(app("team", {}), ref("team"), cluster) == "ctx"  # never ran there
    assert kube_namespace(app("team", running), ref("team"), cluster) == "team"  # before records
    recorded = {**running, "kube_namespaces": {"de": "kept"}}
    assert kube_namespace(app("team", recorded), ref("team"), cluster) == "kept"
    # a Shoal namespace that is no Kubernetes namespace never held anything: the context's
    for namespace in ("my_ns", "system:admin"):
        ran = {"running_on": ref(namespace).model_dump()}
        assert kube_namespace(app(namespace, ran), ref(namespace), cluster) == "ctx"
    assert kube_namespace(app("team", {}), ref("team"), None) == "default"


async def _clusters(
    client: ShoalClient, sim: SimServer, namespace: str, contexts: dict[str, str | None],
    members: KubeClients,
) -> dict[str, KubeCluster]:
    made = []
    for name, context in contexts.items():
        kubeconfig = with_context_namespace(sim.clusters.kubeconfig(name), context)
        cluster = Cluster(metadata=Metadata(name=name, namespace=namespace),
                          spec=ClusterSpec(kubeconfig=kubeconfig))  # fmt: skip
        made.append(await register(client, cluster))
    return {c.metadata.name: await members.get(c) for c in made}


@pytest.fixture
async def members() -> AsyncIterator[KubeClients]:
    """Clients of the member clusters of our own, to read what the controller did there."""
    async with kube_clients(timeout=2.0) as clients:
        yield clients


@pytest.fixture
async def controller(client_of: Callers) -> AsyncIterator[KubeController]:
    ctl = KubeController(client_of("kube-controller"), poll_interval=0.2, timeout=2.0)
    async with started(ctl):
        yield ctl


def _app(name: str, namespace: str, manifest: list[dict[str, Any]]) -> Application:
    return builders.app(name, namespace=namespace, manifest=manifest)


async def _running(client: ShoalClient, name: str, namespace: str) -> Application | None:
    app = await client.get(Application, name, namespace)
    return app if app.status.state is ApplicationState.RUNNING else None


async def _deployment_in(kube: KubeCluster, name: str, namespace: str) -> dict[str, Any] | None:
    return await kube.read(deployment(name), namespace)


async def test_objects_without_a_namespace_go_to_the_contexts_namespace(
    client: ShoalClient, sim: SimServer, controller: KubeController, members: KubeClients
) -> None:
    """In Krake's namespace ``system:admin``: on de, whose context names ``team``, the
    Deployment lands in ``team``; on fr, whose context names none, in ``default``."""
    kube = await _clusters(client, sim, KRAKE, {"de": "team", "fr": None}, members)
    for name, cluster in (("web:de", "de"), ("web:fr", "fr")):
        app = await client.create(_app(name, KRAKE, [deployment(cluster)]))
        await client.bind(app, ResourceRef(api="kubernetes", kind="Cluster", namespace=KRAKE,
                                           name=cluster))  # fmt: skip
    on_de = await wait_for(lambda: _running(client, "web:de", KRAKE), timeout=30,
                           message="web:de RUNNING")  # fmt: skip
    on_fr = await wait_for(lambda: _running(client, "web:fr", KRAKE), timeout=30,
                           message="web:fr RUNNING")  # fmt: skip
    assert on_de.status.kube_namespaces == {"de": "team"}
    assert on_fr.status.kube_namespaces == {"fr": "default"}
    live = await _deployment_in(kube["de"], "de", "team")
    assert live is not None and live["status"].get("readyReplicas") == 2
    assert await _deployment_in(kube["fr"], "fr", "default") is not None
    # nothing in a namespace named after the Shoal namespace (none could be: ':')
    assert await _deployment_in(kube["de"], "de", "default") is None
    # the owner is exact, its labels valid label values
    assert owner_of(live) == Owner(KRAKE, "web:de", on_de.metadata.uid or "")
    labels = live["metadata"]["labels"]
    assert QUALIFIED_NAME.fullmatch(labels[LABEL_NAMESPACE])
    assert live["metadata"]["annotations"][ANNOTATION_APP] == "system:admin/web:de"
    # deleted from where it went
    await client.delete(Application, "web:de", KRAKE)
    await until_gone(client, Application, "web:de", KRAKE, timeout=30)
    assert await _deployment_in(kube["de"], "de", "team") is None


async def test_a_context_changed_later_moves_nothing(
    client: ShoalClient, sim: SimServer, controller: KubeController, members: KubeClients
) -> None:
    kube = await _clusters(client, sim, "team", {"de": "first"}, members)
    app = await client.create(_app("web", "team", [deployment("web")]))
    de = ResourceRef(api="kubernetes", kind="Cluster", namespace="team", name="de")
    await client.bind(app, de)
    await wait_for(lambda: _running(client, "web", "team"), timeout=30, message="web RUNNING")
    cluster = await client.get(Cluster, "de", "team")
    cluster.spec.kubeconfig = with_context_namespace(cluster.spec.kubeconfig or {}, "second")
    await client.update(cluster)
    current = await client.get(Application, "web", "team")
    current.spec.manifest = [deployment("web", replicas=3)]
    await client.bind(await client.update(current), de)  # as the scheduler would, seeing it

    async def scaled() -> bool:
        live = await _deployment_in(kube["de"], "web", "first")
        return live is not None and live["spec"]["replicas"] == 3

    await wait_for(scaled, timeout=30, message="web scaled where it runs")
    assert await _deployment_in(kube["de"], "web", "second") is None
    assert (await client.get(Application, "web", "team")).status.kube_namespaces == {
        "de": "first"
    }


async def test_an_application_running_in_its_namespace_named_one_stays_there(
    client: ShoalClient, sim: SimServer, controller: KubeController, members: KubeClients
) -> None:
    """Deployed before the namespace was recorded: its objects went to a Kubernetes
    namespace named after its Shoal namespace, and stay there until it is deleted."""
    kube = await _clusters(client, sim, "legacy", {"de": None}, members)
    manifest = [deployment("old")]
    created = await client.create(_app("old", "legacy", manifest))
    de = ResourceRef(api="kubernetes", kind="Cluster", namespace="legacy", name="de")
    me = Owner("legacy", "old", created.metadata.uid or "")
    # as the earlier controller left it: applied in namespace "legacy", its status RUNNING
    await kube["de"].ensure_namespace("legacy")
    await kube["de"].apply(owned(manifest[0], me), "legacy")
    await client.patch_status(Application, "old", "legacy", {
        "running_on": de.model_dump(mode="json"), "deploy_state": "RUNNING",
        "last_applied_manifest": manifest,
    })  # fmt: skip
    await client.bind(await client.get(Application, "old", "legacy"), de)

    async def recorded() -> Application | None:
        app = await client.get(Application, "old", "legacy")
        return app if app.status.kube_namespaces else None

    app = await wait_for(recorded, timeout=30, message="its namespace recorded")
    assert app.status.kube_namespaces == {"de": "legacy"}
    await wait_for(lambda: _running(client, "old", "legacy"), timeout=30, message="RUNNING")
    assert await _deployment_in(kube["de"], "old", "legacy") is not None
    assert await _deployment_in(kube["de"], "old", "default") is None
    await client.delete(Application, "old", "legacy")
    await until_gone(client, Application, "old", "legacy", timeout=30)
    assert await _deployment_in(kube["de"], "old", "legacy") is None


async def test_each_cluster_of_a_placement_takes_its_own_contexts_namespace(
    client: ShoalClient, sim: SimServer, controller: KubeController, members: KubeClients
) -> None:
    kube = await _clusters(client, sim, KRAKE, {"de": "team", "fr": None}, members)
    app = await client.create(Application.model_validate({
        "metadata": {"name": "spread", "namespace": KRAKE},
        "spec": {"manifest": [deployment("spread", replicas=4)],
                 "placement": {"clusters": 2, "replicas": "divided"}},
    }))  # fmt: skip
    refs = [{"api": "kubernetes", "kind": "Cluster", "namespace": KRAKE, "name": n}
            for n in ("de", "fr")]  # fmt: skip
    await client.bind_many([{
        "namespace": KRAKE, "name": "spread", "cluster": refs[0],
        "resource_version": app.metadata.resource_version,
        "placements": [{"cluster": ref, "replicas": 2} for ref in refs],
    }])  # fmt: skip
    running = await wait_for(lambda: _running(client, "spread", KRAKE), timeout=30,
                             message="spread RUNNING on both")  # fmt: skip
    assert running.status.kube_namespaces == {"de": "team", "fr": "default"}
    on_de = await _deployment_in(kube["de"], "spread", "team")
    on_fr = await _deployment_in(kube["fr"], "spread", "default")
    assert on_de is not None and on_fr is not None
    assert on_de["spec"]["replicas"] == 2 and on_fr["spec"]["replicas"] == 2
    await client.delete(Application, "spread", KRAKE)
    await until_gone(client, Application, "spread", KRAKE, timeout=30)
    assert await _deployment_in(kube["de"], "spread", "team") is None
    assert await _deployment_in(kube["fr"], "spread", "default") is None
