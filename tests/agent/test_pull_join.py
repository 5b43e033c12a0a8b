"""``shoal join`` end to end: a ``shoal sim`` cluster joins the secured API (served on TLS
as ``shoal up --tls`` serves it) in pull mode, its agent keeps its status and lease, the
observer marks it OFFLINE when the lease lapses and ONLINE when it comes back."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shoal.agent import joining
from shoal.api.server import ApiServer, start_api
from shoal.client.rest import ShoalClient
from shoal.machinery.tls import Tls, ca_hash, issue, make_ca, write_pair
from shoal.model.events import Event
from shoal.model.kubernetes import Cluster, ClusterState
from shoal.observer.controller import ClusterObserver
from shoal.system.join import Join, run_joined
from shoal.testing import shipped
from shoal.testing.sim import running_sim
from shoal.testing.wait import wait_for


@dataclasses.dataclass
class Hub:
    server: ApiServer
    admin: ShoalClient
    ca: str

    @property
    def ca_hash(self) -> str:
        return ca_hash(self.ca)

    async def token(self, namespace: str = "default") -> str:
        answer = await self.admin.request(
            "POST", f"/kubernetes/namespaces/{namespace}/jointokens", body={}
        )
        return str(answer["token"])


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    """The API with the security ``shoal up --tls`` ships: its CA, its certificate."""
    async with serving() as made:
        yield made


@contextlib.asynccontextmanager
async def serving(credential_ttl: float = 3600.0) -> AsyncIterator[Hub]:
    setup = shipped.setup()
    directory = setup.directory
    tls = Tls(directory / "api.crt", directory / "api.key", directory / "ca.crt")
    security = dataclasses.replace(shipped.security(), tls=tls,
                                   cluster_credential_ttl=credential_ttl)  # fmt: skip
    server = await start_api("sqlite://:memory:", security=security)
    ca = (directory / "ca.crt").read_text()
    admin = ShoalClient(server.url, token=shipped.token("admin"), ssl_context=joining.trust(ca))
    try:
        yield Hub(server, admin, ca)
    finally:
        await admin.close()
        await server.stop()


@contextlib.asynccontextmanager
async def agent(join: Join) -> AsyncIterator[asyncio.Task[None]]:
    started = asyncio.Event()
    task = asyncio.create_task(run_joined(join, started))
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # the join failed: say why
    try:
        yield task
    finally:
        task.cancel()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_sim_cluster_joins_and_keeps_its_status(hub: Hub, tmp_path: Path) -> None:
    async with running_sim(clusters=["edge"], nodes=3) as sim:
        join = Join(hub.server.url, "edge-7", tmp_path / "state", sim.kubeconfig("edge"),
                    token=await hub.token(), ca_hash=hub.ca_hash,
                    labels={"location": "DE"}, every=0.2)  # fmt: skip
        async with agent(join):
            cluster = await hub.admin.get(Cluster, "edge-7", "default")
            assert cluster.spec.mode == "pull" and cluster.spec.kubeconfig is None
            assert cluster.metadata.labels == {"location": "DE"}

            async def online() -> bool:
                found = await hub.admin.get(Cluster, "edge-7", "default")
                return found.status.state is ClusterState.ONLINE

            await wait_for(online)
            cluster = await hub.admin.get(Cluster, "edge-7", "default")
            summary = cluster.status.node_summary[0]
            assert (summary["count"], summary["ready"]) == (3, 3)
            assert len(cluster.status.nodes) == 3
            assert cluster.status.heartbeat is not None
            assert cluster.status.agent_version
        kept = joining.load(tmp_path / "state")
        assert kept is not None and kept.name == "edge-7"
        assert ((tmp_path / "state" / joining.STATE_FILE).stat().st_mode & 0o777) == 0o600


async def test_a_restarted_join_resumes_without_the_token(hub: Hub, tmp_path: Path) -> None:
    async with running_sim(clusters=["edge"], nodes=1) as sim:
        state = tmp_path / "state"
        first = Join(hub.server.url, "edge-7", state, sim.kubeconfig("edge"),
                     token=await hub.token(), ca_hash=hub.ca_hash, every=0.2)  # fmt: skip
        async with agent(first):
            pass
        before = (await hub.admin.get(Cluster, "edge-7", "default")).status.heartbeat
        again = Join(hub.server.url, "edge-7", state, sim.kubeconfig("edge"), every=0.2)
        async with agent(again):

            async def beating() -> bool:
                found = await hub.admin.get(Cluster, "edge-7", "default")
                return found.status.heartbeat != before

            await wait_for(beating)
        # the token was used up by the first join: only the kept credential did this
        with pytest.raises(joining.JoinError, match="refused"):
            await joining.exchange(hub.server.url, hub.ca, first.token or "", "edge-8", {}, "")


async def test_a_wrong_ca_hash_is_refused(hub: Hub, tmp_path: Path) -> None:
    other = make_ca("another-ca")[1].decode()
    join = Join(hub.server.url, "edge-7", tmp_path / "state", {}, token=await hub.token(),
                ca_hash=ca_hash(other))  # fmt: skip
    with pytest.raises(joining.WrongCa):
        await run_joined(join)
    assert not (tmp_path / "state" / joining.STATE_FILE).exists()
    clusters = await hub.admin.list(Cluster, "default")
    assert clusters.items == []  # the token never left the member


async def test_an_impostor_serving_the_pinned_ca_is_refused(hub: Hub, tmp_path: Path) -> None:
    """A server that shows the hub's CA at /cluster-info (it is no secret) but holds a
    certificate of another CA: the hash matches, the verified connection does not."""
    impostor_ca = make_ca("impostor-ca")
    write_pair(tmp_path, "impostor", issue(*impostor_ca, "shoal-api", hosts=("127.0.0.1",)))
    setup = shipped.setup()
    tls = Tls(tmp_path / "impostor.crt", tmp_path / "impostor.key", setup.directory / "ca.crt")
    impostor = await start_api(
        "sqlite://:memory:", security=dataclasses.replace(shipped.security(), tls=tls)
    )
    try:
        join = Join(impostor.url, "edge-7", tmp_path / "state", {}, token=await hub.token(),
                    ca_hash=hub.ca_hash)  # fmt: skip
        with pytest.raises(joining.JoinError, match="certificate verify failed"):
            await run_joined(join)
    finally:
        await impostor.stop()
    assert not (tmp_path / "state" / joining.STATE_FILE).exists()


async def test_a_lapsed_lease_is_offline_and_back_online(hub: Hub, tmp_path: Path) -> None:
    observer = ClusterObserver(
        ShoalClient(hub.server.url, token=shipped.token("cluster-observer"),
                    ssl_context=joining.trust(hub.ca)), lease=1.0)  # fmt: skip
    running = asyncio.create_task(observer.run())
    try:
        async with running_sim(clusters=["edge"], nodes=1) as sim:
            join = Join(hub.server.url, "edge-7", tmp_path / "state", sim.kubeconfig("edge"),
                        token=await hub.token(), ca_hash=hub.ca_hash, every=0.1)  # fmt: skip

            async def state_is(state: ClusterState) -> bool:
                found = await hub.admin.get(Cluster, "edge-7", "default")
                return found.status.state is state

            async with agent(join):
                await wait_for(lambda: state_is(ClusterState.ONLINE))
            await wait_for(lambda: state_is(ClusterState.OFFLINE))  # its agent stopped
            found = await hub.admin.get(Cluster, "edge-7", "default")
            assert found.status.reason is not None
            assert "lease lapsed" in found.status.reason.message
            async with agent(dataclasses.replace(join, token=None)):
                await wait_for(lambda: state_is(ClusterState.ONLINE))

            async def told() -> list[str] | None:
                events = (await hub.admin.list(Event, "default")).items
                said = [e.reason for e in events if e.involved_object.name == "edge-7"]
                return said if {"Joined", "Offline", "Online"} <= set(said) else None

            await wait_for(told)  # joined, lease lost, back
            offline = next(e for e in (await hub.admin.list(Event, "default")).items
                           if e.reason == "Offline")  # fmt: skip
            assert "lease lapsed" in offline.message
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await observer.client.close()


async def test_shoal_join_as_a_process(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line the token's maker prints, run as a process of its own."""
    import os
    import signal

    import yaml

    from tests.cli.conftest import invoke, process

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"api": hub.server.url, "token": shipped.token("admin"),
                                      "ca": str(shipped.setup().ca)}))  # fmt: skip
    monkeypatch.setenv("SHOAL_CONFIG", str(config))
    monkeypatch.delenv("SHOAL_API", raising=False)
    env = dict(os.environ)
    made = await invoke("kube", "cluster", "join-token", "create", "--ttl", "10m")
    assert made.exit_code == 0, made.output
    token = made.stdout.splitlines()[0]
    line = next(x for x in made.output.splitlines() if "shoal join" in x)
    assert f"--ca-hash {hub.ca_hash}" in line and f"--token {token}" in line
    async with running_sim(clusters=["edge"], nodes=2) as sim:
        member = tmp_path / "member.yaml"
        member.write_text(yaml.safe_dump(sim.kubeconfig("edge")))
        joined = await process(
            "join", "--api", hub.server.url, "--token", token, "--ca-hash", hub.ca_hash,
            "--kubeconfig", str(member), "--name", "edge-9", "-l", "location=DE",
            "--state-dir", str(tmp_path / "state"), "--every", "0.2", env=env,
        )  # fmt: skip
        try:

            async def online() -> bool:
                clusters = await hub.admin.list(Cluster, "default")
                return any(c.metadata.name == "edge-9" and c.status.state is ClusterState.ONLINE
                           for c in clusters.items)  # fmt: skip

            await wait_for(online, timeout=60)
            found = await hub.admin.get(Cluster, "edge-9", "default")
            assert found.metadata.labels == {"location": "DE"}
            assert found.spec.mode == "pull"
        finally:
            joined.send_signal(signal.SIGTERM)
            await joined.wait()


async def test_the_agent_renews_its_credential_before_it_expires(tmp_path: Path) -> None:
    """Credentials of 3 s: the agent keeps writing well past the first one's expiry, each
    renewal kept in the state directory."""
    async with serving(credential_ttl=3.0) as short, running_sim(clusters=["edge"], nodes=1) as sim:
        state = tmp_path / "state"
        join = Join(short.server.url, "edge-7", state, sim.kubeconfig("edge"),
                    token=await short.token(), ca_hash=short.ca_hash, every=0.2)  # fmt: skip
        async with agent(join) as running:
            first = joining.load(state)
            assert first is not None

            async def renewed_twice() -> bool:
                now = joining.load(state)
                return now is not None and now.expires > first.expires + 1.0

            await wait_for(renewed_twice, timeout=20)
            loop = asyncio.get_running_loop()
            past = loop.time() + max(0.0, first.expires - time.time()) + 0.5
            await wait_for(lambda: loop.time() > past, timeout=10)  # the first one expired
            before = (await short.admin.get(Cluster, "edge-7", "default")).status.heartbeat

            async def still_beating() -> bool:
                found = await short.admin.get(Cluster, "edge-7", "default")
                return found.status.heartbeat != before

            await wait_for(still_beating)
            assert not running.done()
