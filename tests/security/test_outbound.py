"""Where tenants' URLs and a cloud's password may go, on the API ``shoal up`` ships.

- The outbound policy: a URL a tenant gives (a namespaced provider's, a template's)
  reaches no loopback, link-local or private address unless the administrator
  lists it, refused at write time (422 naming the field) and where a controller
  connects (nothing is sent).
- A cloud's password goes only to the provider its reference named when it was
  stored: not to a provider named like it later, not through a reference
  changed by a writer who kept the password with the placeholder.
- The ``sim`` provider is an administrator's (global only); the simulator's
  admin API answers only its token's holder.

alice is the attacker, bob the victim; the infrastructure controller runs as its own
component identity, and ``shoal sim`` is the real simulator.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web

from shoal.api.auth.secrets import REDACTED
from shoal.client.rest import ShoalClient
from shoal.infrastructure.controller import InfrastructureController
from shoal.machinery import outbound
from shoal.model.core import Metric, MetricsProvider
from shoal.model.infrastructure import InfrastructureProvider
from shoal.scheduler.metrics.cache import MetricCache
from shoal.scheduler.metrics.providers.base import MetricError
from shoal.testing.wait import wait_for
from tests.security import conftest
from tests.security.conftest import Secured, grant, role
from tests.util import started

CONTROLLER = "system:infrastructure-controller"
PASSWORD = "the-cloud-password-9f3b"
TOSCA = {
    "tosca_definitions_version": "tosca_simple_yaml_1_0",
    "topology_template": {
        "node_templates": {"node": {"type": "tosca.nodes.Compute"}},
        "outputs": {"kubeconfig": {"value": "set by the infrastructure provider"}},
    },
}


@pytest.fixture(autouse=True)
def _component_and_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The infrastructure controller gets a token of its own; the policy is the default."""
    monkeypatch.setitem(conftest.TOKENS, CONTROLLER, "infrastructure-token")
    monkeypatch.delenv(outbound.SETTING, raising=False)


# an Infrastructure Manager that records what it is sent ------------------------------


@dataclass
class Listener:
    """An HTTP server on loopback that answers as an empty IM and records every request."""

    url: str = ""
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth

    def passwords(self) -> list[str]:
        return [auth for _, _, auth in self.seen if PASSWORD in auth]


@contextlib.asynccontextmanager
async def listening() -> AsyncIterator[Listener]:
    listener = Listener()

    async def answer(request: web.Request) -> web.Response:
        listener.seen.append(
            (request.method, request.path, request.headers.get("Authorization", ""))
        )
        if request.path == "/hop":
            raise web.HTTPFound(location=f"{listener.url}/landed")
        if request.method == "GET" and request.path == "/infrastructures":
            return web.json_response({"uri-list": []})
        if request.method == "POST" and request.path == "/infrastructures":
            return web.Response(text=f"{listener.url}/infrastructures/inf-1")
        if request.path.endswith("/state"):
            return web.json_response({"state": {"state": "pending", "vm_states": {}}})
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    listener.url = f"http://127.0.0.1:{port}"
    try:
        yield listener
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def infrastructure_controller(secured: Secured) -> AsyncIterator[None]:
    token = conftest.TOKENS[CONTROLLER]
    async with ShoalClient(secured.server.url, token=token) as client:
        controller = InfrastructureController(client, poll=0.1, timeout=2.0, retry_cap=0.5)
        async with started(controller):
            yield None


# bodies -------------------------------------------------------------------------------


def im_provider(name: str, url: str, namespace: str | None = None) -> dict[str, Any]:
    kind = "InfrastructureProvider" if namespace else "GlobalInfrastructureProvider"
    return {
        "api": "infrastructure", "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "im", "im": {"url": url, "token": "im-login"}},
    }  # fmt: skip


def sim_provider(name: str, url: str, namespace: str) -> dict[str, Any]:
    return {
        "api": "infrastructure", "kind": "InfrastructureProvider",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "sim", "sim": {"url": url}},
    }  # fmt: skip


def cloud(name: str, namespace: str, provider: dict[str, Any]) -> dict[str, Any]:
    return {
        "api": "infrastructure", "kind": "Cloud",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {"type": "openstack", "openstack": {
            "url": "https://keystone.example:5000/v3",
            "auth": {"type": "password", "password": {
                "version": "3", "user": {"username": "u", "password": PASSWORD},
                "project": {"name": "p"}}},
            "infrastructure_provider": provider,
        }},
    }  # fmt: skip


def cluster_to_build(name: str, namespace: str) -> dict[str, Any]:
    return {
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"tosca": TOSCA},
    }  # fmt: skip


async def ok(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def refused(answer: httpx.Response, field: str, *words: str) -> None:
    """A 422 naming ``field``, its reason holding ``words``."""
    assert answer.status_code == 422, answer.text
    errors = answer.json()["errors"]
    assert errors[0]["field"] == field, errors
    for word in words:
        assert word in errors[0]["reason"], errors


async def store_directly(secured: Secured, body: dict[str, Any]) -> None:
    """Put an object in the store past the API's checks: one stored before they existed."""
    meta = body["metadata"]
    meta.update(uid=str(uuid.uuid4()), created="2026-01-01T00:00:00Z",
                modified="2026-01-01T00:00:00Z")  # fmt: skip
    key = InfrastructureProvider.key(meta["name"], meta["namespace"])
    await secured.server.store.create(key, orjson.dumps(body))


async def tenant_without_secrets(secured: Secured, user: str, namespace: str) -> None:
    """``user`` may do everything in ``namespace`` but read secrets."""
    verbs = ("create", "list", "list_all", "get", "update", "delete", "watch")
    await grant(secured["admin"], user, role(f"{user}-{namespace}", namespaces=(namespace,),
                                             verbs=verbs))  # fmt: skip

    async def granted() -> bool:
        answer = await secured[user].get(f"/infrastructure/namespaces/{namespace}/clouds")
        return answer.status_code == 200

    await wait_for(granted, timeout=10, message=f"{user}'s role in {namespace}")


def policy_listing_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An administrator who lets tenants reach 127.0.0.0/8 (where alice's IM listens), so
    that only the rule on a cloud's provider stands between her and the password."""
    path = tmp_path / "outbound.yaml"
    path.write_text("networks: [127.0.0.0/8]\n")
    monkeypatch.setenv(outbound.SETTING, str(path))


async def bind_and_wait_for_a_build(
    secured: Secured, user: str, namespace: str, name: str, good: Listener
) -> None:
    client = secured[user]
    await ok(await client.post(f"/kubernetes/namespaces/{namespace}/clusters",
                               json=cluster_to_build(name, namespace)))  # fmt: skip
    binding = {"cloud": {"api": "infrastructure", "kind": "Cloud", "namespace": namespace,
                         "name": "shared"}}  # fmt: skip
    await ok(await client.put(f"/kubernetes/namespaces/{namespace}/clusters/{name}/binding",
                              json=binding))  # fmt: skip

    async def built_by_the_cloud_s_provider() -> bool:
        return any(method == "POST" for method, _, _ in good.seen)

    await wait_for(built_by_the_cloud_s_provider, timeout=30,
                   message="the cloud's own IM asked to build")  # fmt: skip


# a cloud's password -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def shared_cloud_beside_alices_im(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> AsyncIterator[str]:
    """alice (namespace ``t``, no right on secrets) beside the global provider ``im``, the
    cloud ``shared`` in ``t`` that names it, and her own provider ``name``; the cloud's path.
    After the block, her cluster on the cloud is built and the cloud's password went to
    the global provider's IM alone, never to hers."""
    policy_listing_loopback(tmp_path, monkeypatch)
    await tenant_without_secrets(secured, "alice", "t")
    admin, alice = secured["admin"], secured["alice"]
    async with listening() as good, listening() as evil:
        await ok(await admin.post("/infrastructure/globalinfrastructureproviders",
                                  json=im_provider("im", good.url)))  # fmt: skip
        await ok(await admin.post("/infrastructure/namespaces/t/clouds",
                                  json=cloud("shared", "t", {"name": "im"})))  # fmt: skip
        await ok(await alice.post("/infrastructure/namespaces/t/infrastructureproviders",
                                  json=im_provider(name, evil.url, "t")))  # fmt: skip
        yield "/infrastructure/namespaces/t/clouds/shared"

        async with infrastructure_controller(secured):
            await bind_and_wait_for_a_build(secured, "alice", "t", "c1", good)
        assert good.passwords(), good.seen
        assert evil.seen == []


async def test_a_changed_provider_reference_needs_the_password_again(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PUT that moves a cloud to alice's IM while keeping the password is refused."""
    admin, alice = secured["admin"], secured["alice"]
    async with shared_cloud_beside_alices_im(secured, tmp_path, monkeypatch, "evil") as path:
        body = await ok(await alice.get(path))
        assert body["spec"]["openstack"]["auth"]["password"]["user"]["password"] == REDACTED
        body["spec"]["openstack"]["infrastructure_provider"] = {"name": "evil",
                                                                "namespaced": True}
        answer = await alice.put(path, json=body)
        assert answer.status_code == 403, answer.text
        assert answer.json()["errors"][0]["field"] == "spec.openstack.infrastructure_provider"
        stored = (await admin.get(path)).json()["spec"]["openstack"]
        assert stored["infrastructure_provider"]["name"] == "im"


async def test_a_namespaced_provider_named_like_the_global_one_changes_nothing(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice makes ``im`` in her namespace, the name of the cloud's global provider: the
    cloud's password still goes to the global one, and a no-op PUT does not move it."""
    admin, alice = secured["admin"], secured["alice"]
    async with shared_cloud_beside_alices_im(secured, tmp_path, monkeypatch, "im") as path:
        body = await ok(await alice.get(path))
        body["metadata"]["labels"] = {"touched": "yes"}
        await ok(await alice.put(path, json=body))  # the same destination: kept
        ref = (await ok(await admin.get(path)))["spec"]["openstack"]["infrastructure_provider"]
        provider = await ok(await admin.get("/infrastructure/globalinfrastructureproviders/im"))
        assert ref["uid"] == provider["metadata"]["uid"] and ref["namespaced"] is False


# the outbound policy --------------------------------------------------------------------


async def test_tenants_urls_to_our_hosts_are_refused_at_write_time(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, admin = secured["alice"], secured["admin"]
    metrics = "/core/namespaces/a/metricsproviders"
    for url, words in (
        ("http://127.0.0.1:9090", ("127.0.0.1", "loopback")),
        ("http://localhost:9090", ("localhost resolves to", "loopback")),
        ("http://[::1]:9090", ("::1", "loopback")),
        ("http://[::ffff:127.0.0.1]:9090", ("127.0.0.1", "loopback")),
        ("http://169.254.169.254/latest/meta-data", ("link-local",)),
        ("http://10.0.0.7:9090", ("private",)),
        ("http://192.168.1.1:9090", ("private",)),
    ):
        body = {"api": "core", "kind": "MetricsProvider", "metadata": {"name": "p"},
                "spec": {"type": "prometheus", "prometheus": {"url": url}}}  # fmt: skip
        answer = await alice.post(metrics, json=body)
        refused(answer, "spec.prometheus.url", "outbound policy", *words)
        # a dry run refuses it the same way
        refused(await alice.post(f"{metrics}?dry_run=true", json=body), "spec.prometheus.url")
    answer = await alice.post("/infrastructure/namespaces/a/infrastructureproviders",
                              json=im_provider("im", "http://127.0.0.2:8800", "a"))  # fmt: skip
    refused(answer, "spec.im.url", "loopback")
    # a template's URL: the prefixes the administrator allows, and the policy
    monkeypatch.setenv("SHOAL_TOSCA_URLS", "http://")
    body = cluster_to_build("from-url", "a")
    body["spec"]["tosca"] = "http://localhost:8000/cluster.yaml"
    refused(await alice.post("/kubernetes/namespaces/a/clusters", json=body), "spec.tosca",
            "loopback")  # fmt: skip
    # an update cannot bring one in either
    public = {"type": "prometheus", "prometheus": {"url": "http://8.8.8.8:9090"}}
    body = {"api": "core", "kind": "MetricsProvider", "metadata": {"name": "fine"},
            "spec": public}  # fmt: skip
    stored = await ok(await alice.post(metrics, json=body))
    stored["spec"]["prometheus"]["url"] = "http://127.0.0.1:9090"
    refused(await alice.put(f"{metrics}/fine", json=stored), "spec.prometheus.url")
    # a cluster-wide provider is the administrator's, who may point it anywhere
    local = {"type": "prometheus", "prometheus": {"url": "http://127.0.0.1:9090"}}
    body = {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "local"},
            "spec": local}  # fmt: skip
    await ok(await admin.post("/core/globalmetricsproviders", json=body))


async def test_a_stored_tenant_url_is_refused_where_it_is_fetched() -> None:
    """A namespaced metrics provider pointing at loopback (stored before the policy): the
    metric cache sends it nothing and says why."""
    async with listening() as target, MetricCache(timeout=2.0) as cache:
        cache.set_provider(MetricsProvider.model_validate({
            "metadata": {"name": "p", "namespace": "a"},
            "spec": {"type": "prometheus", "prometheus": {"url": target.url}},
        }))  # fmt: skip
        cache.set_metric(Metric.model_validate({
            "metadata": {"name": "load", "namespace": "a"},
            "spec": {"min": 0, "max": 1, "provider": {"name": "p", "metric": "load"}},
        }))  # fmt: skip
        await cache.refresh_now()
        found = cache.lookup("load", True, "a")
        assert isinstance(found, MetricError), found
        assert "outbound policy" in found.message and "loopback" in found.message
        assert target.seen == []


async def test_the_policy_checks_the_addresses_connected_to() -> None:
    """A name is checked by the addresses it resolves to when the connection is made, and a
    redirect is checked like the first URL."""
    async with listening() as target:
        by_name = target.url.replace("127.0.0.1", "localhost")
        async with outbound.session() as http:
            for url in (f"{target.url}/x", f"{by_name}/x"):
                with pytest.raises(outbound.OutboundRefused, match="loopback"):
                    async with http.get(url):
                        pass
        listed = outbound.OutboundPolicy(networks=("127.0.0.1/32",))  # type: ignore[arg-type]
        async with outbound.session(listed) as http:
            async with http.get(f"{target.url}/infrastructures") as answer:
                assert answer.status == 200  # a listed network: allowed
        named = outbound.OutboundPolicy(hosts=("localhost",))
        async with outbound.session(named) as http:
            with pytest.raises(outbound.OutboundRefused, match=r"127\.0\.0\.1, a loopback"):
                async with http.get(f"{by_name}/hop"):  # redirected to 127.0.0.1: not listed
                    pass
        assert [path for _, path, _ in target.seen] == ["/infrastructures", "/hop"]


async def test_shoal_up_writes_the_default_policy(tmp_path: Path) -> None:
    from shoal.system.demo import outbound_policy

    path = outbound_policy(tmp_path)
    loaded = outbound._load(str(path))
    assert loaded == outbound.OutboundPolicy()
    assert await loaded.refusal("http://127.0.0.1:1/") is not None


async def test_an_administrator_s_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "outbound.yaml"
    path.write_text(
        "schemes: [https]\nhosts: ['*.internal.example']\nnetworks: [10.20.0.0/16]\n"
        "public: false\n"
    )
    policy = outbound._load(str(path))
    assert await policy.refusal("https://im.internal.example/") is None  # listed name
    assert await policy.refusal("https://10.20.3.4/") is None  # listed network
    assert "scheme 'http'" in (await policy.refusal("http://10.20.3.4/") or "")
    assert "private" in (await policy.refusal("https://10.21.0.1/") or "")
    assert "no network" in (await policy.refusal("https://8.8.8.8/") or "")  # public: false
    broken = tmp_path / "broken.yaml"
    broken.write_text("networks: [not-a-network]\n")
    with pytest.raises(ValueError, match="networks"):
        outbound._load(str(broken))
