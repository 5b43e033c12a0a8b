"""Names and namespaces as Krake allows them, on every kind and route.

Krake's names are 1 to 255 ASCII letters, digits, '_', '-', '.' or ':', starting and
ending with a letter, digit or '_': its CLI's default namespace is ``system:admin``.
"""

from __future__ import annotations

import httpx
import pytest

from shoal.client.rest import ApiError
from shoal.machinery.names import object_name_problem
from shoal.model.kubernetes import Application
from shoal.testing import shipped
from tests.api.conftest import start_watch
from tests.api.samples import APPLICATION, SAMPLES, Sample
from tests.conftest import Tenant
from tests.util import wait_for

KRAKE_NAMESPACE = "system:admin"
KRAKE_NAMES = ("GlobalInfrastructureProvider_instance", "a.b:c_D", "_", "x" * 255)


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("system:admin", True), ("GlobalInfrastructureProvider_instance", True), ("a", True),
        ("_x_", True), ("a.b-c:d", True), ("x" * 255, True), ("x" * 256, False), ("", False),
        ("-a", False), ("a-", False), ("a:", False), (".a", False), ("a b", False),
        ("a/b", False), ("é", False), ("a\n", False),
    ],
)  # fmt: skip
def test_the_name_rule_is_krakes(name: str, valid: bool) -> None:
    assert (object_name_problem(name) is None) is valid


async def _round_trip(http: httpx.AsyncClient, sample: Sample, name: str) -> None:
    namespace = KRAKE_NAMESPACE if sample.namespaced else None
    created = await http.post(sample.collection(namespace), json=sample.body(name, namespace))
    assert created.status_code == 200, (sample.kind, created.text)
    assert created.json()["metadata"]["name"] == name
    if sample.namespaced:
        assert created.json()["metadata"]["namespace"] == KRAKE_NAMESPACE
    read = await http.get(sample.item(name, namespace))
    assert read.status_code == 200, (sample.kind, read.text)
    listed = await http.get(sample.collection(namespace))
    assert listed.status_code == 200, (sample.kind, listed.text)
    assert name in [item["metadata"]["name"] for item in listed.json()["items"]]
    body = read.json()
    body["metadata"]["labels"] = {"changed": "yes"}  # the name is what is tried here
    updated = await http.put(sample.item(name, namespace), json=body)
    assert updated.status_code == 200, (sample.kind, updated.text)
    assert updated.json()["metadata"]["labels"] == {"changed": "yes"}
    deleted = await http.delete(sample.item(name, namespace))
    assert deleted.status_code == 200, (sample.kind, deleted.text)


async def test_every_kind_takes_krake_names_in_namespace_system_admin(
    http: httpx.AsyncClient,
) -> None:
    for sample in SAMPLES:
        await _round_trip(http, sample, "GlobalInfrastructureProvider_instance")


@pytest.mark.parametrize("name", KRAKE_NAMES)
async def test_an_application_takes_each_krake_name(http: httpx.AsyncClient, name: str) -> None:
    await _round_trip(http, APPLICATION, name)


async def test_a_name_krake_refuses_is_refused_naming_the_field(
    http: httpx.AsyncClient,
) -> None:
    for name in ("-a", "a:", "x" * 256, "a b"):
        answer = await http.post(APPLICATION.collection(), json=APPLICATION.body(name, "default"))
        assert answer.status_code == 422, answer.text
        assert "metadata.name" in answer.text and "255" in answer.text
    answer = await http.post(
        APPLICATION.collection("a:"), json=APPLICATION.body("web", "a:")
    )
    assert answer.status_code == 422 and "namespace" in answer.text, answer.text
    # nothing can have such a name: a read finds nothing
    assert (await http.get(APPLICATION.item("web", "-a"))).status_code == 404


async def test_namespaces_that_share_a_prefix_do_not_see_each_others_objects(
    http: httpx.AsyncClient,
) -> None:
    """The store's keys are ``/{api}/{plural}/{namespace}/{name}``: ':' and '.' sort on
    either side of '/', so a prefix listing of one namespace must not reach the others."""
    namespaces = ("a", "a:b", "a.b", "a_b", "a-b")
    watches = {ns: await start_watch(http, APPLICATION.collection(ns)) for ns in namespaces}
    try:
        for ns in namespaces:
            answer = await http.post(APPLICATION.collection(ns), json=APPLICATION.body(ns, ns))
            assert answer.status_code == 200, answer.text
        for ns in namespaces:
            listed = (await http.get(APPLICATION.collection(ns))).json()["items"]
            assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed] == [
                (ns, ns)
            ]
        for ns, watch in watches.items():
            await wait_for(lambda w=watch: len(w.events) >= 1, message=f"{ns}'s watch event")
        everything = (await http.get("/kubernetes/applications")).json()["items"]
        assert sorted(o["metadata"]["namespace"] for o in everything) == sorted(namespaces)
        for ns in namespaces:
            await http.post(
                APPLICATION.collection(ns), json=APPLICATION.body("late", ns)
            )
        for ns, watch in watches.items():
            await wait_for(lambda w=watch: len(w.events) >= 2, message=f"{ns}'s second event")
            seen = {e["object"]["metadata"]["namespace"] for e in watch.events}
            assert seen == {ns}, (ns, seen)
    finally:
        for watch in watches.values():
            await watch.stop()


async def test_a_tenant_works_in_namespace_system_admin(client: object, tenant: Tenant) -> None:
    """As shipped: a tenant granted ``system:admin`` creates, reads and lists there, and is
    refused in ``system-admin``, a namespace whose name a mapping could confuse with it."""
    alice = await tenant(shipped.TENANTS[0], KRAKE_NAMESPACE)
    body = APPLICATION.body("web_1.v2", KRAKE_NAMESPACE)
    created = await alice.create(Application.model_validate(body))
    assert created.metadata.namespace == KRAKE_NAMESPACE
    assert [a.metadata.name for a in (await alice.list(Application, KRAKE_NAMESPACE)).items] == [
        "web_1.v2"
    ]
    read = await alice.get(Application, "web_1.v2", KRAKE_NAMESPACE)
    assert read.metadata.uid == created.metadata.uid
    with pytest.raises(ApiError) as refused:
        await alice.list(Application, "system-admin")
    assert refused.value.status == 403


async def test_a_namespace_written_percent_encoded_is_the_same(http: httpx.AsyncClient) -> None:
    """The dashboard encodes each part of a path (``system%3Aadmin``)."""
    answer = await http.post(
        "/kubernetes/namespaces/system%3Aadmin/applications",
        json=APPLICATION.body("web", KRAKE_NAMESPACE),
    )
    assert answer.status_code == 200, answer.text
    listed = (await http.get("/kubernetes/namespaces/system:admin/applications")).json()
    assert [o["metadata"]["name"] for o in listed["items"]] == ["web"]
    read = await http.get("/kubernetes/namespaces/system%3Aadmin/applications/web")
    assert read.status_code == 200 and read.json()["metadata"]["namespace"] == KRAKE_NAMESPACE
