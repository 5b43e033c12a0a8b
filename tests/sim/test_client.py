"""kubernetes_asyncio (the client Shoal uses for member clusters) against the sim."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from shoal.sim.server import SimServer
from tests.util import wait_for

pytestmark = pytest.mark.integration


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "50m"}}}]}},
        },
    }


async def test_kubernetes_asyncio(sim: SimServer) -> None:
    api_client = await config.new_client_from_config_dict(sim.clusters.kubeconfig("alpha"))
    async with api_client:
        core = client.CoreV1Api(api_client)
        apps = client.AppsV1Api(api_client)
        nodes = await core.list_node()
        assert len(nodes.items) == 3
        assert nodes.items[0].status.allocatable["cpu"] == "8"
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="app")))
        with pytest.raises(ApiException) as err:
            await core.create_namespace({"metadata": {"name": "app"}})
        assert err.value.status == 409
        created = await apps.create_namespaced_deployment("app", deployment("web", 2))
        rv = created.metadata.resource_version

        # watch from the creation's resourceVersion until the deployment is ready
        w = watch.Watch()
        seen = []
        async with asyncio.timeout(10):
            async for event in w.stream(apps.list_namespaced_deployment, "app",
                                        resource_version=rv, timeout_seconds=10):
                seen.append(event["type"])
                if event["object"].status.ready_replicas == 2:
                    w.stop()
        assert seen and set(seen) == {"MODIFIED"}
        pods = await core.list_namespaced_pod("app", label_selector="app=web",
                                              field_selector="status.phase=Running")
        assert len(pods.items) == 2

        # server-side apply (kubernetes_asyncio sends apply-patch+yaml for dicts when asked)
        manifest = deployment("web", 3)
        applied = await apps.patch_namespaced_deployment(
            "web", "app", manifest, field_manager="shoal", force=True,
            _content_type="application/apply-patch+yaml")
        assert applied.spec.replicas == 3

        async def three_ready() -> bool:
            st = await apps.read_namespaced_deployment_status("web", "app")
            return bool(st.status.ready_replicas == 3 and st.status.available_replicas == 3)
        await wait_for(three_ready, message="3 ready replicas")

        # status subresource writes only the status
        st = await apps.read_namespaced_deployment_status("web", "app")
        st.status.observed_generation = 99
        st.spec.replicas = 7
        updated = await apps.replace_namespaced_deployment_status("web", "app", st)
        assert updated.spec.replicas == 3

        await apps.delete_namespaced_deployment("web", "app")
        assert (await core.list_namespaced_pod("app")).items == []


async def test_unreachable_raises_connection_error(sim: SimServer) -> None:
    api_client = await config.new_client_from_config_dict(sim.clusters.kubeconfig("beta"))
    async with api_client:
        core = client.CoreV1Api(api_client)
        await core.list_node()
        sim.clusters.set_unreachable("beta")
        with pytest.raises(aiohttp.ClientError):
            await core.list_node()
        sim.clusters.set_unreachable("beta", False)
        assert len((await core.list_node()).items) == 3
