"""The tenant red-team, tried again under a real ``shoal up``.

alice has every verb on namespace team-a except ``secrets``, bob the same on team-b; each
registers a member cluster. Every attack of the report is refused or harmless: listeners
the attacker holds receive nothing, no command of theirs runs, and the member clusters
(read through their own API) hold nothing of the other tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cli.conftest import process
from tests.security.conftest import pages_of
from tests.util import free_port, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TENANT_VERBS = ["create", "list", "list_all", "get", "update", "delete", "watch"]


class Listener:
    """A TCP listener held by the attacker: counts every connection made to it."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self.server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def _tenant_setup(admin: httpx.AsyncClient, user: str, namespace: str) -> None:
    rule = {"api": "*", "resources": ["*"], "namespaces": [namespace], "verbs": TENANT_VERBS}
    role = {"api": "core", "kind": "Role", "metadata": {"name": user}, "rules": [rule]}
    bound = {"api": "core", "kind": "RoleBinding", "metadata": {"name": user},
             "users": [user], "roles": [user]}  # fmt: skip
    assert (await admin.post("/core/roles", json=role)).status_code == 200
    assert (await admin.post("/core/rolebindings", json=bound)).status_code == 200


def _cluster(name: str, namespace: str, kubeconfig: dict[str, Any]) -> dict[str, Any]:
    return {"api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"kubeconfig": kubeconfig, "metrics": []}}  # fmt: skip


def _application(name: str, namespace: str) -> dict[str, Any]:
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                 "data": {"owner": namespace}}]  # fmt: skip
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"manifest": manifest}}  # fmt: skip


async def test_the_red_team_report_under_shoal_up(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    up = await process("up", "--port", str(port), "--data-dir", str(data), "--clusters", "2",
                       "--no-demo", env=env)  # fmt: skip
    assert up.stdout is not None
    output = bytearray()

    async def drain() -> None:
        assert up.stdout is not None
        while chunk := await up.stdout.read(65536):
            output.extend(chunk)

    drained = asyncio.create_task(drain())
    listener = Listener()
    await listener.start()
    try:
        config_file = data / "security" / "config.yaml"
        await wait_for(config_file.exists, timeout=90, message="shoal up's banner")
        config = yaml.safe_load(config_file.read_text())
        tokens = data / "security" / "tokens.csv"
        with tokens.open("a") as out:
            out.write("alice-token,alice,alice,\nbob-token,bob,bob,\n")
        url = config["api"]
        admin = httpx.AsyncClient(base_url=url,
                                  headers={"authorization": f"Bearer {config['token']}"})
        await _tenant_setup(admin, "alice", "team-a")
        await _tenant_setup(admin, "bob", "team-b")
        alice = httpx.AsyncClient(base_url=url, headers={"authorization": "Bearer alice-token"})
        bob = httpx.AsyncClient(base_url=url, headers={"authorization": "Bearer bob-token"})

        async def tenants_ready() -> bool:
            answers = [await c.get(f"/kubernetes/namespaces/{ns}/clusters")
                       for c, ns in ((alice, "team-a"), (bob, "team-b"))]  # fmt: skip
            return all(a.status_code == 200 for a in answers)

        await wait_for(tenants_ready, timeout=30, message="tenants' roles")
        sim1 = yaml.safe_load((data / "kubeconfigs" / "sim-1.yaml").read_text())
        sim2 = yaml.safe_load((data / "kubeconfigs" / "sim-2.yaml").read_text())
        answer = await alice.post("/kubernetes/namespaces/team-a/clusters",
                                  json=_cluster("alice-cluster", "team-a", sim1))  # fmt: skip
        assert answer.status_code == 200, answer.text
        answer = await bob.post("/kubernetes/namespaces/team-b/clusters",
                                json=_cluster("bob-cluster", "team-b", sim2))  # fmt: skip
        assert answer.status_code == 200, answer.text

        # Row 1: a kubeconfig that runs a command, or reads a file, on Shoal's hosts.
        marker = tmp_path / "alice-was-here"
        for user in (
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                      "args": ["-c", f"id > {marker}"]}},
            {"tokenFile": str(data / "security" / "tokens.csv")},
        ):  # fmt: skip
            kubeconfig = {**sim1, "users": [{**sim1["users"][0], "user": user}]}
            answer = await alice.post("/kubernetes/namespaces/team-a/clusters",
                                      json=_cluster("evil", "team-a", kubeconfig))  # fmt: skip
            assert answer.status_code == 422, answer.text

        # Row 2: the kept token sent to the attacker's listener.
        path = "/kubernetes/namespaces/team-a/clusters/alice-cluster"
        body = (await alice.get(path)).json()
        assert "redacted" in body["spec"]["kubeconfig"]["users"][0]["user"]["token"]
        body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = (
            f"https://127.0.0.1:{listener.port}"
        )
        answer = await alice.put(path, json=body)
        assert answer.status_code == 403, answer.text

        # Row 3: a body two parsers read differently.
        item = b'{"namespace": "team-a", "name": "alice-app", "finalizers": ["bob"]}'
        answer = await bob.post("/scheduling/applicationfinalizers",
                                content=b'{"items": NaN, "items": [%s]}' % item,
                                headers={"content-type": "application/json"})  # fmt: skip
        assert answer.status_code == 400, answer.text

        # Row 4: bob's application bound to alice's cluster.
        answer = await bob.post("/kubernetes/namespaces/team-b/applications",
                                json=_application("bob-app", "team-b"))  # fmt: skip
        assert answer.status_code == 200, answer.text
        binding = {"cluster": {"api": "kubernetes", "kind": "Cluster", "namespace": "team-a",
                               "name": "alice-cluster"}}  # fmt: skip
        answer = await bob.put("/kubernetes/namespaces/team-b/applications/bob-app/binding",
                               json=binding)  # fmt: skip
        assert answer.status_code == 422, answer.text

        # bob's application runs on bob's cluster: the controllers are at work meanwhile.
        async def running() -> bool:
            got = await bob.get("/kubernetes/namespaces/team-b/applications/bob-app")
            return bool(got.json()["status"]["state"] == "RUNNING")

        await wait_for(running, timeout=60, message="bob's application RUNNING")
        app = (await bob.get("/kubernetes/namespaces/team-b/applications/bob-app")).json()
        assert app["status"]["running_on"]["name"] == "bob-cluster"
        sim = (data / "sim.url").read_text().strip()
        async with httpx.AsyncClient() as member:
            # the ConfigMap names no namespace: its kubeconfig context's, "default"
            configmaps = "/api/v1/namespaces/default/configmaps/bob-app"
            on_alices = await member.get(f"{sim}/clusters/sim-1{configmaps}",
                                         headers={"authorization": f"Bearer {_token(sim1)}"})
            on_bobs = await member.get(f"{sim}/clusters/sim-2{configmaps}",
                                       headers={"authorization": f"Bearer {_token(sim2)}"})
        assert on_alices.status_code == 404 and on_bobs.status_code == 200

        # Row 5: paging across namespaces tells bob nothing of team-a.
        names: list[str] = []
        async for page, decoded in pages_of(bob, "/kubernetes/applications", most=20):
            names += [i["metadata"]["namespace"] for i in page["items"]]
            assert "team-a" not in decoded
        assert set(names) == {"team-b"}

        # Row 6: a selector that tests a secret.
        answer = await bob.get("/kubernetes/namespaces/team-b/clusters",
                               params={"field_selector": "spec.kubeconfig=x"})  # fmt: skip
        assert answer.status_code == 400, answer.text

        # Row 7: watches.
        apps = "/kubernetes/namespaces/team-b/applications"
        assert (await bob.get(f"{apps}?watch=false&watch=true")).status_code == 400
        answer = await bob.get(apps, params={"watch": "true", "heartbeat": "0.000001"})
        assert answer.status_code == 422 and "heartbeat" in answer.text

        # Agents: a commit from anyone but the fleet scheduler.
        async def agent_url() -> str | None:
            got = await admin.get("/kubernetes/namespaces/default/clusters/sim-1")
            return got.json()["status"].get("agent") or None

        agent = await wait_for(agent_url, timeout=60, message="sim-1's agent registered")
        pod = {"metadata": {"name": "p", "uid": "u"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
        async with httpx.AsyncClient() as anyone:
            answer = await anyone.post(f"{agent}/agent/scheduling-decision",
                                       json={"pod": pod, "nodeName": "n-0"})  # fmt: skip
            assert answer.status_code == 401, answer.text
            # Row 9: the dashboard's policy.
            page = await anyone.get(f"{url}/ui/")
            assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

        # Row 9: the data directory is the user's alone.
        for name in ("shoal.db", "logs", "kubeconfigs", "security"):
            mode = stat.S_IMODE((data / name).stat().st_mode)
            assert mode & 0o077 == 0, (name, oct(mode))

        await asyncio.sleep(2)  # a second for the observer: it would have connected by now
        assert listener.connections == 0
        assert not marker.exists()
        await alice.aclose()
        await bob.aclose()
        await admin.aclose()
    finally:
        await listener.stop()
        with contextlib.suppress(ProcessLookupError):
            up.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(up.wait(), 30)
        except TimeoutError:
            up.kill()
        await drained
    assert b"Traceback" not in output, output.decode()[-3000:]


def _token(kubeconfig: dict[str, Any]) -> str:
    return str(kubeconfig["users"][0]["user"]["token"])

