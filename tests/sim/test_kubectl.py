"""kubectl 1.32 against a sim cluster (kubectl runs as a subprocess)."""

from __future__ import annotations

import asyncio

import pytest

from shoal.sim.server import SimServer
from tests.sim.conftest import Kubectl
from tests.util import wait_for

pytestmark = pytest.mark.integration

DEPLOY = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: REPLICAS
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: IMAGE
        ports: [{containerPort: 80}]
        resources:
          requests: {cpu: 100m, memory: 64Mi}
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: SIZE}
"""


def deploy(replicas: int = 3, image: str = "nginx:1.27") -> str:
    return DEPLOY.replace("REPLICAS", str(replicas)).replace("IMAGE", image)


async def test_get_nodes(kubectl: Kubectl) -> None:
    r = await kubectl.run("get", "nodes")
    lines = r.out.strip().splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATUS"]
    assert len(lines) == 4
    assert all(" Ready " in line for line in lines[1:])
    r = await kubectl.run("get", "nodes", "-l", "topology.kubernetes.io/zone=alpha-region-a",
                          "-o", "name")
    assert r.out.split() == ["node/n-0"]


async def test_apply_update_watch_delete(kubectl: Kubectl, tmp_path: object) -> None:
    r = await kubectl.run("apply", "-f", "-", stdin=deploy(3))
    assert "deployment.apps/web created" in r.out

    async def running(n: int, image: str) -> bool:
        out = (await kubectl.run("get", "pods", "-l", "app=web", "-o",
                                 "custom-columns=S:.status.phase,I:.spec.containers[0].image",
                                 "--no-headers")).out.split("\n")
        rows = [line.split() for line in out if line.strip()]
        return len(rows) == n and all(row == ["Running", image] for row in rows)

    await wait_for(lambda: running(3, "nginx:1.27"), timeout=15, message="3 running pods")
    r = await kubectl.run("get", "pods")
    assert r.out.count("Running") == 3 and "1/1" in r.out
    # watch while applying a change
    watch = asyncio.create_task(kubectl.run("get", "deploy", "web", "-w", timeout=3, check=False))
    await asyncio.sleep(1.0)
    r = await kubectl.run("apply", "-f", "-", stdin=deploy(4, "nginx:1.28"))
    assert "deployment.apps/web configured" in r.out
    await wait_for(lambda: running(4, "nginx:1.28"), timeout=15, message="rolled to 1.28")
    watched = (await watch).out.strip().splitlines()
    assert watched[0].split()[:2] == ["NAME", "READY"]
    assert len(watched) >= 3, watched
    assert watched[-1].split()[1] == "4/4"
    r = await kubectl.run("get", "deploy", "web", "-o", "jsonpath={.status.readyReplicas}")
    assert r.out == "4"
    r = await kubectl.run("rollout", "status", "deploy/web", "--timeout=10s")
    assert "successfully rolled out" in r.out
    r = await kubectl.run("delete", "-f", "-", stdin=deploy(4))
    assert 'deployment.apps "web" deleted' in r.out
    r = await kubectl.run("get", "pods,rs", "-o", "name")
    assert r.out.strip() == ""


async def test_kubectl_misc(kubectl: Kubectl) -> None:
    await kubectl.run("create", "namespace", "team")
    await kubectl.run("-n", "team", "create", "configmap", "cfg", "--from-literal=a=1")
    await kubectl.run("-n", "team", "label", "configmap", "cfg", "tier=x")
    r = await kubectl.run("-n", "team", "get", "cm", "-l", "tier in (x,y)", "-o", "name")
    assert r.out.strip() == "configmap/cfg"
    await kubectl.run("apply", "--server-side", "-f", "-", stdin=deploy(2))
    await kubectl.run("scale", "deploy/web", "--replicas=1")
    r = await kubectl.run("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}")
    assert r.out == "1"
    r = await kubectl.run("describe", "deploy", "web")
    assert "Replicas:" in r.out
    r = await kubectl.run("get", "all")
    assert "deployment.apps/web" in r.out
    await kubectl.run("delete", "namespace", "team")
    r = await kubectl.run("get", "ns", "team", check=False)
    assert r.code != 0 and "NotFound" in r.err


async def test_crd_and_custom_resource(kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", "-", stdin=CRD)
    r = await kubectl.run("apply", "-f", "-", stdin=WIDGET.replace("SIZE", "3"))
    assert "widget.example.com/w1 created" in r.out
    r = await kubectl.run("apply", "-f", "-", stdin=WIDGET.replace("SIZE", "5"))
    assert "configured" in r.out
    r = await kubectl.run("get", "wd")
    assert r.out.split("\n")[0].split() == ["NAME", "SIZE", "AGE"]
    assert r.out.split("\n")[1].split()[:2] == ["w1", "5"]
    r = await kubectl.run("api-resources", "--api-group=example.com")
    assert "widgets" in r.out
    await kubectl.run("delete", "crd", "widgets.example.com")
    r = await kubectl.run("get", "widgets", check=False)
    assert r.code != 0


async def test_node_fault_and_unreachable(sim: SimServer, kubectl: Kubectl) -> None:
    sim.clusters.set_node_fault("alpha", "n-1", not_ready=True)
    r = await kubectl.run("get", "nodes")
    assert "n-1    NotReady" in r.out
    sim.clusters.set_unreachable("alpha")
    # client-go retries dropped connections (EOF) ten times, as it would for a real
    # network failure, so the run is cut short rather than waited out
    r = await kubectl.run("get", "nodes", timeout=2.5, check=False)
    assert r.code != 0
    assert "n-0" not in r.out
    sim.clusters.clear_faults("alpha")
    r = await kubectl.run("get", "nodes")
    assert "NotReady" not in r.out


async def test_kubectl_typed_generators(kubectl: Kubectl) -> None:
    """kubectl's generators post protobuf: each supported kind arrives decoded."""
    await kubectl.run("create", "namespace", "gen")
    await kubectl.run("-n", "gen", "create", "secret", "generic", "s", "--from-literal=k=v")
    await kubectl.run("-n", "gen", "create", "serviceaccount", "robot")
    r = await kubectl.run("-n", "gen", "get", "secret", "s", "-o",
                          "jsonpath={.data.k} {.metadata.namespace}")
    assert r.out == "dg== gen"
    r = await kubectl.run("-n", "gen", "get", "sa", "-o", "name")
    assert "serviceaccount/robot" in r.out
    r = await kubectl.run("get", "ns", "gen", "-o", "jsonpath={.metadata.labels}")
    assert '"kubernetes.io/metadata.name":"gen"' in r.out
