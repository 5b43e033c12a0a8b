"""The sim's Kubernetes API and controllers, over HTTP with httpx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from shoal.sim.server import SimServer
from shoal.testing import builders
from tests.util import wait_for

Obj = dict[str, Any]


@pytest.fixture
async def alpha(sim: SimServer) -> AsyncIterator[httpx.AsyncClient]:
    """Cluster ``alpha``'s Kubernetes API, with its token."""
    token = sim.clusters.cluster("alpha").token
    async with httpx.AsyncClient(
        base_url=f"{sim.url}/clusters/alpha",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ) as client:
        yield client


def deployment(name: str, replicas: int = 2, cpu: str = "100m", image: str = "nginx:1") -> Obj:
    """A Deployment of ``replicas`` pods asking ``cpu`` each (its container is ``main``)."""
    return builders.deployment(name, image, {"cpu": cpu}, replicas)


async def pods(alpha: httpx.AsyncClient, selector: str = "", ns: str = "default") -> list[Obj]:
    r = await alpha.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector})
    r.raise_for_status()
    items: list[Obj] = r.json()["items"]
    return items


async def test_discovery(alpha: httpx.AsyncClient) -> None:
    assert (await alpha.get("/version")).json()["major"] == "1"
    assert (await alpha.get("/api")).json()["versions"] == ["v1"]
    groups = {g["name"] for g in (await alpha.get("/apis")).json()["groups"]}
    assert {"apps", "batch", "apiextensions.k8s.io"} <= groups
    names = {r["name"] for r in (await alpha.get("/apis/apps/v1")).json()["resources"]}
    assert {"deployments", "deployments/status", "deployments/scale", "replicasets"} <= names
    ns = {n["metadata"]["name"] for n in (await alpha.get("/api/v1/namespaces")).json()["items"]}
    assert {"default", "kube-system"} <= ns


async def test_unauthorized_and_unknown_cluster(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as client:
        r = await client.get(
            "/clusters/alpha/api/v1/nodes", headers={"Authorization": "Bearer nope"}
        )
        assert r.status_code == 401
        r = await client.get("/clusters/nope/api/v1/nodes")
        assert r.status_code == 404


async def test_nodes_have_capacity_labels_and_conditions(sim: SimServer) -> None:
    sim.clusters.add_cluster(
        "gamma", nodes=4, node_labels={"tier": "edge"}, cpu="4", memory="8Gi", region="eu-west"
    )
    async with httpx.AsyncClient(base_url=f"{sim.url}/clusters/gamma") as client:
        nodes = (await client.get("/api/v1/nodes")).json()["items"]
    assert len(nodes) == 4
    n = nodes[0]
    assert n["status"]["allocatable"]["cpu"] == "4"
    assert n["status"]["capacity"]["memory"] == "8Gi"
    labels = n["metadata"]["labels"]
    assert labels["tier"] == "edge"
    assert labels["topology.kubernetes.io/region"] == "eu-west"
    assert labels["topology.kubernetes.io/zone"].startswith("eu-west-")
    assert labels["kubernetes.io/hostname"] == n["metadata"]["name"]
    ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"


async def test_crud_errors_are_status_objects(alpha: httpx.AsyncClient) -> None:
    r = await alpha.get("/api/v1/namespaces/default/configmaps/missing")
    assert r.status_code == 404
    assert r.json()["kind"] == "Status" and r.json()["reason"] == "NotFound"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    created = (await alpha.post("/api/v1/namespaces/default/configmaps", json=cm)).json()
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    r = await alpha.post("/api/v1/namespaces/default/configmaps", json=cm)
    assert r.status_code == 409 and r.json()["reason"] == "AlreadyExists"
    stale = dict(created, data={"a": "2"})
    answer = await alpha.put("/api/v1/namespaces/default/configmaps/c", json=stale)
    assert answer.status_code == 200
    r = await alpha.put("/api/v1/namespaces/default/configmaps/c", json=stale)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}
    r = await alpha.post("/api/v1/namespaces/default/configmaps", json=bad)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    r = await alpha.post("/api/v1/namespaces/nope/configmaps", json=cm)
    assert r.status_code == 404
    r = await alpha.patch(
        "/api/v1/namespaces/default/configmaps/c",
        content=b'{"data":{"b":"3"}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.json()["data"] == {"a": "2", "b": "3"}
    r = await alpha.patch(
        "/api/v1/namespaces/default/configmaps/c",
        content=b'[{"op":"remove","path":"/data/a"}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert r.json()["data"] == {"b": "3"}
    r = await alpha.delete("/api/v1/namespaces/default/configmaps/c")
    assert r.status_code == 200 and r.json()["status"] == "Success"


async def test_deployment_runs_and_rolls(alpha: httpx.AsyncClient) -> None:
    r = await alpha.post("/apis/apps/v1/namespaces/default/deployments", json=deployment("web", 3))
    assert r.status_code == 201

    async def ready() -> Obj | None:
        d = (await alpha.get("/apis/apps/v1/namespaces/default/deployments/web")).json()
        return d if d.get("status", {}).get("readyReplicas") == 3 else None

    d = await wait_for(ready, message="3 ready replicas")
    assert d["status"]["availableReplicas"] == 3
    running = await pods(alpha, "app=web")
    assert len(running) == 3
    assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in running)
    old_names = {p["metadata"]["name"] for p in running}
    # a template change replaces the pods
    r = await alpha.patch(
        "/apis/apps/v1/namespaces/default/deployments/web",
        content=orjson.dumps(
            {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}}
        ),
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert r.status_code == 200
    assert r.json()["metadata"]["generation"] == 2

    async def rolled() -> bool:
        ps = await pods(alpha, "app=web")
        return len(ps) == 3 and all(
            p["spec"]["containers"][0]["image"] == "nginx:2" and p["status"]["phase"] == "Running"
            for p in ps
        )

    await wait_for(rolled, message="rolled pods")
    assert not old_names & {p["metadata"]["name"] for p in await pods(alpha, "app=web")}
    rs = (await alpha.get("/apis/apps/v1/namespaces/default/replicasets")).json()["items"]
    assert len(rs) == 1
    # scale subresource
    r = await alpha.patch(
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
        content=b'{"spec":{"replicas":1}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.json()["spec"]["replicas"] == 1
    await wait_for(lambda: _count(alpha, "app=web", 1), message="scaled down")
    # cascading delete
    await alpha.delete("/apis/apps/v1/namespaces/default/deployments/web")
    assert await pods(alpha, "app=web") == []
    assert (await alpha.get("/apis/apps/v1/namespaces/default/replicasets")).json()["items"] == []


async def _count(alpha: httpx.AsyncClient, selector: str, n: int) -> bool:
    return len(await pods(alpha, selector)) == n


async def test_pending_when_nothing_fits(alpha: httpx.AsyncClient) -> None:
    await alpha.post(
        "/apis/apps/v1/namespaces/default/deployments", json=deployment("big", 1, cpu="64")
    )

    async def unschedulable() -> Obj | None:
        ps = await pods(alpha, "app=big")
        if not ps:
            return None
        conds = {c["type"]: c for c in ps[0]["status"].get("conditions", [])}
        sched = conds.get("PodScheduled")
        return ps[0] if sched and sched["reason"] == "Unschedulable" else None

    pod = await wait_for(unschedulable, message="Unschedulable condition")
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    # 3 nodes x 8 cpu: 7 pods of 3 cpu fit (2 per node), the 4th per node does not
    await alpha.post(
        "/apis/apps/v1/namespaces/default/deployments", json=deployment("mid", 7, cpu="3")
    )

    async def placed() -> bool:
        ps = await pods(alpha, "app=mid")
        return len(ps) == 7 and sum(1 for p in ps if p["spec"].get("nodeName")) == 6

    await wait_for(placed, message="6 of 7 placed")
    # freeing room schedules the pending pod
    await alpha.patch(
        "/apis/apps/v1/namespaces/default/deployments/mid",
        content=b'{"spec":{"replicas":5}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )

    async def all_placed() -> bool:
        ps = await pods(alpha, "app=mid")
        return len(ps) == 5 and all(p["spec"].get("nodeName") for p in ps)

    await wait_for(all_placed, message="all placed after scale down")


async def test_binding_for_custom_scheduler(alpha: httpx.AsyncClient) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"schedulerName": "shoal", "containers": [{"name": "c", "image": "x"}]},
    }
    await alpha.post("/api/v1/namespaces/default/pods", json=pod)
    r = await alpha.get("/api/v1/namespaces/default/pods",
                        params={"fieldSelector": "spec.nodeName="})
    assert [p["metadata"]["name"] for p in r.json()["items"]] == ["p"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n-2"},
    }
    r = await alpha.post("/api/v1/namespaces/default/pods/p/binding", json=binding)
    assert r.status_code == 201
    r = await alpha.post("/api/v1/namespaces/default/pods/p/binding", json=binding)
    assert r.status_code == 409

    async def running() -> bool:
        p = (await alpha.get("/api/v1/namespaces/default/pods/p")).json()
        return bool(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] == "n-2")

    await wait_for(running, message="bound pod running")


async def test_job_statefulset_daemonset(alpha: httpx.AsyncClient) -> None:
    tmpl = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"completions": 2, "parallelism": 2, "template": tmpl},
    }
    assert (await alpha.post("/apis/batch/v1/namespaces/default/jobs", json=job)).status_code == 201
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": tmpl},
    }
    assert (
        await alpha.post("/apis/apps/v1/namespaces/default/statefulsets", json=sts)
    ).status_code == 201
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": tmpl},
    }
    assert (
        await alpha.post("/apis/apps/v1/namespaces/default/daemonsets", json=ds)
    ).status_code == 201

    async def job_done() -> bool:
        j = (await alpha.get("/apis/batch/v1/namespaces/default/jobs/j")).json()
        return any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in j["status"].get("conditions", [])
        )

    await wait_for(job_done, message="job complete")
    j = (await alpha.get("/apis/batch/v1/namespaces/default/jobs/j")).json()
    assert j["status"]["succeeded"] == 2

    async def sts_ready() -> bool:
        s = (await alpha.get("/apis/apps/v1/namespaces/default/statefulsets/db")).json()
        return bool(s["status"].get("readyReplicas") == 2)

    await wait_for(sts_ready, message="sts ready")
    assert (await alpha.get("/api/v1/namespaces/default/pods/db-1")).status_code == 200

    async def ds_ready() -> bool:
        d = (await alpha.get("/apis/apps/v1/namespaces/default/daemonsets/agent")).json()
        return bool(d["status"].get("numberReady") == 3)

    await wait_for(ds_ready, message="ds ready")


async def test_watch_resume_and_gone(sim: SimServer, alpha: httpx.AsyncClient) -> None:
    listed = (await alpha.get("/api/v1/namespaces/default/configmaps")).json()
    rv = listed["metadata"]["resourceVersion"]
    for i in range(3):
        cm = {"metadata": {"name": f"c{i}", "labels": {"n": str(i)}}}
        await alpha.post("/api/v1/namespaces/default/configmaps", json=cm)
    await alpha.delete("/api/v1/namespaces/default/configmaps/c0")
    events = []
    async with alpha.stream(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        params={
            "watch": "true",
            "resourceVersion": rv,
            "labelSelector": "n in (0,1)",
            "timeoutSeconds": "1",
        },
    ) as r:
        async for line in r.aiter_lines():
            if line:
                events.append(orjson.loads(line))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "c0"),
        ("ADDED", "c1"),
        ("DELETED", "c0"),
    ]
    sim.clusters.cluster("alpha").store.compact()
    r = await alpha.get(
        "/api/v1/namespaces/default/configmaps", params={"watch": "true", "resourceVersion": rv}
    )
    assert r.status_code == 410 and r.json()["reason"] == "Expired"


async def test_limit_and_continue(alpha: httpx.AsyncClient) -> None:
    r = await alpha.get("/api/v1/nodes", params={"limit": 2})
    body = r.json()
    assert len(body["items"]) == 2 and body["metadata"]["remainingItemCount"] == 1
    r = await alpha.get(
        "/api/v1/nodes", params={"limit": 2, "continue": body["metadata"]["continue"]}
    )
    assert [n["metadata"]["name"] for n in r.json()["items"]] == ["n-2"]
    assert "continue" not in r.json()["metadata"]


async def test_server_side_apply(alpha: httpx.AsyncClient) -> None:
    manifest = b"""
apiVersion: v1
kind: ConfigMap
metadata: {name: applied, labels: {a: "1"}}
data: {x: "1", y: "2"}
"""
    url = "/api/v1/namespaces/default/configmaps/applied"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    r = await alpha.patch(url, content=manifest, params={"fieldManager": "one"}, headers=headers)
    assert r.status_code == 201 and r.json()["data"] == {"x": "1", "y": "2"}
    # the same manager dropping a field removes it
    r = await alpha.patch(
        url,
        content=manifest.replace(b', y: "2"', b""),
        params={"fieldManager": "one"},
        headers=headers,
    )
    assert r.json()["data"] == {"x": "1"}
    # another manager changing an owned field conflicts unless forced
    other = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"x":"9"}}'
    r = await alpha.patch(url, content=other, params={"fieldManager": "two"}, headers=headers)
    assert r.status_code == 409
    r = await alpha.patch(
        url, content=other, params={"fieldManager": "two", "force": "true"}, headers=headers
    )
    assert r.status_code == 200 and r.json()["data"] == {"x": "9"}
    managers = {m["manager"] for m in r.json()["metadata"]["managedFields"]}
    assert managers == {"one", "two"}


async def test_node_faults(sim: SimServer, alpha: httpx.AsyncClient) -> None:
    await alpha.post("/apis/apps/v1/namespaces/default/deployments", json=deployment("w", 3))

    async def ready(n: int) -> bool:
        d = (await alpha.get("/apis/apps/v1/namespaces/default/deployments/w")).json()
        return bool(d.get("status", {}).get("readyReplicas") == n)

    await wait_for(lambda: ready(3), message="3 ready")
    victim = (await pods(alpha, "app=w"))[0]["spec"]["nodeName"]
    sim.clusters.set_node_fault("alpha", victim, not_ready=True)
    node = (await alpha.get(f"/api/v1/nodes/{victim}")).json()
    conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conds["Ready"] == "False"
    await wait_for(lambda: ready(2), message="pods on the NotReady node not ready")
    sim.clusters.set_node_fault("alpha", victim, memory_pressure=True)
    node = (await alpha.get(f"/api/v1/nodes/{victim}")).json()
    conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conds["MemoryPressure"] == "True"
    sim.clusters.set_node_fault("alpha", victim, removed=True)
    assert (await alpha.get(f"/api/v1/nodes/{victim}")).status_code == 404

    async def moved() -> bool:
        ps = await pods(alpha, "app=w")
        return len(ps) == 3 and all(
            p["spec"].get("nodeName") not in (None, victim) and p["status"]["phase"] == "Running"
            for p in ps
        )

    await wait_for(moved, message="pods re-created elsewhere")
    await wait_for(lambda: ready(3), message="3 ready again")
    sim.clusters.clear_faults("alpha")
    assert (await alpha.get(f"/api/v1/nodes/{victim}")).status_code == 200
    assert sim.clusters.cluster("alpha").faults() == {
        "unreachable": False,
        "latency": 0.0,
        "nodes": {},
    }


async def test_unreachable_is_a_connection_error(sim: SimServer, alpha: httpx.AsyncClient) -> None:
    sim.clusters.set_unreachable("alpha")
    with pytest.raises(httpx.TransportError):
        await alpha.get("/api/v1/nodes")
    # other clusters are unaffected
    async with httpx.AsyncClient(base_url=f"{sim.url}/clusters/beta") as beta:
        assert (await beta.get("/api/v1/nodes")).status_code == 200
    sim.clusters.set_unreachable("alpha", False)
    assert (await alpha.get("/api/v1/nodes")).status_code == 200


async def test_latency_answers_late_and_ends(sim: SimServer, alpha: httpx.AsyncClient) -> None:
    """A slow cluster answers every Kubernetes API request that late; the others do not wait."""
    async with httpx.AsyncClient(base_url=sim.url, headers=sim.admin_headers) as admin:
        r = await admin.post("/admin/clusters/alpha/faults", json={"latency": 0.3})
        assert r.status_code == 200 and r.json()["latency"] == 0.3
        loop = asyncio.get_running_loop()
        started = loop.time()
        answers = await asyncio.gather(*(alpha.get("/api/v1/nodes") for _ in range(3)))
        assert all(a.status_code == 200 for a in answers)
        assert loop.time() - started >= 0.3
        assert sim.clusters.cluster("beta").latency == 0.0
        for bad in (-1, True, "1"):
            r = await admin.post("/admin/clusters/alpha/faults", json={"latency": bad})
            assert r.status_code == 422 and "latency" in r.json()["message"], bad
        r = await admin.post("/admin/clusters/alpha/faults", json={"latency": 0})
        assert r.json()["latency"] == 0.0
        sim.clusters.set_latency("alpha", 0.2)
        r = await admin.delete("/admin/clusters/alpha/faults")
        assert r.json()["latency"] == 0.0 and sim.clusters.cluster("alpha").latency == 0.0


async def test_admin_api(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as stranger:
        for method, path in (
            ("GET", "/admin/clusters"),
            ("GET", "/admin/clusters/alpha/kubeconfig"),
            ("POST", "/admin/clusters"),
            ("DELETE", "/admin/clusters/alpha"),
        ):
            r = await stranger.request(method, path, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401, (method, path)
            assert "token" in r.json()["message"]
        assert (await stranger.get("/admin/clusters")).status_code == 401
    assert "alpha" in sim.clusters.clusters  # the DELETE without the token deleted nothing
    async with httpx.AsyncClient(base_url=sim.url, headers=sim.admin_headers) as client:
        r = await client.post("/admin/clusters", json={"name": "delta", "nodes": 7,
                                                       "labels": {"gpu": "yes"}})
        assert r.status_code == 201
        kubeconfig = r.json()["kubeconfig"]
        assert kubeconfig["clusters"][0]["cluster"]["server"] == f"{sim.url}/clusters/delta"
        assert len(kubeconfig["users"]) == len(kubeconfig["contexts"]) == 1
        r = await client.post(
            "/admin/clusters/delta/faults", json={"node": "n-3", "not_ready": True}
        )
        assert r.json()["nodes"] == {"n-3": {"not_ready": True}}
        r = await client.post("/admin/clusters/delta/faults", json={"unreachable": True})
        listing = {c["name"]: c for c in (await client.get("/admin/clusters")).json()["clusters"]}
        assert listing["delta"]["nodes"] == 7 and listing["delta"]["ready_nodes"] == 6
        assert listing["delta"]["faults"]["unreachable"] is True
        r = await client.delete("/admin/clusters/delta/faults")
        assert r.json() == {"unreachable": False, "latency": 0.0, "nodes": {}}
        assert (await client.post("/admin/clusters", json={"name": "delta"})).status_code == 409
        assert (await client.delete("/admin/clusters/delta")).status_code == 200
        assert (await client.get("/admin/clusters/delta")).status_code == 404


async def test_a_node_port_service_gets_its_node_ports(alpha: httpx.AsyncClient) -> None:
    """As a cluster does: each port of a NodePort (or LoadBalancer) Service gets a node
    port of 30000-32767, kept on update; a ClusterIP Service gets none."""
    path = "/api/v1/namespaces/default/services"

    def service(name: str, kind: str, *ports: dict[str, object]) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"type": kind, "ports": list(ports)}}  # fmt: skip

    created = (await alpha.post(path, json=service("np", "NodePort", {"port": 80},
                                                 {"port": 81, "name": "b"}))).json()  # fmt: skip
    given = [p["nodePort"] for p in created["spec"]["ports"]]
    assert all(30000 <= p <= 32767 for p in given) and len(set(given)) == 2, given
    created["metadata"]["labels"] = {"x": "y"}
    del created["spec"]["ports"][0]["nodePort"]  # a client's PUT without it keeps it
    updated = (await alpha.put(f"{path}/np", json=created)).json()
    assert [p["nodePort"] for p in updated["spec"]["ports"]] == given
    chosen = (
        await alpha.post(path, json=service("mine", "NodePort", {"port": 80, "nodePort": 31999}))
    ).json()
    assert chosen["spec"]["ports"][0]["nodePort"] == 31999
    plain = (await alpha.post(path, json=service("plain", "ClusterIP", {"port": 80}))).json()
    assert "nodePort" not in plain["spec"]["ports"][0]
