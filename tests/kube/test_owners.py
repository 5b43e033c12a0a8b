"""Objects in member clusters have owners: two applications never fight over one object."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shoal.client.kube import KubeCluster
from shoal.client.rest import ShoalClient
from shoal.copies.owners import (
    ANNOTATION_APP,
    ANNOTATION_UID,
    LABEL_NAME,
    LABEL_NAMESPACE,
    LABEL_UID,
    Owner,
    former_owner,
    mine,
    owned,
    owner_of,
    refusal,
)
from shoal.kube.controller import KubeController
from shoal.machinery.names import QUALIFIED_NAME
from shoal.model.base import ReasonCode, ResourceRef
from shoal.model.events import Event
from shoal.model.kubernetes import Application, ApplicationState, Cluster
from shoal.testing import builders
from shoal.testing.shipped import Callers
from tests.kube.conftest import NS, deployment
from tests.util import started, until_gone, wait_for

pytestmark = pytest.mark.integration

DE = ResourceRef(api="kubernetes", kind="Cluster", namespace=NS, name="de")


@pytest.fixture
async def controller(
    client: ShoalClient, client_of: Callers, clusters: list[Cluster]
) -> AsyncIterator[KubeController]:
    ctl = KubeController(
        client_of("kube-controller"), poll_interval=0.2, resync=60.0, timeout=2.0
    )
    async with started(ctl):
        yield ctl


def shared(name: str, overwrite: bool = False) -> Application:
    """Application ``name`` whose manifest holds the Deployment ``shared``."""
    spec: dict[str, Any] = {"manifest": [deployment("shared", replicas=1)]}
    if overwrite:
        spec["conflict_resolution"] = "overwrite"
    return builders.app(name, namespace=NS, **spec)


async def deploy(client: ShoalClient, app: Application) -> Application:
    created = await client.create(app)
    await client.bind(created, DE)
    return created


async def running(client: ShoalClient, name: str) -> bool:
    app = await client.get(Application, name, NS)
    return app.status.state is ApplicationState.RUNNING


async def refused(client: ShoalClient, name: str) -> Application | None:
    app = await client.get(Application, name, NS)
    reason = app.status.reason
    return app if reason is not None and reason.code is ReasonCode.CONFLICT else None


def owner(app: Application) -> Owner:
    assert app.metadata.uid is not None
    return Owner(NS, app.metadata.name, app.metadata.uid)


async def test_second_application_is_refused_and_overwrite_takes_over(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    de = kube["de"]
    first = await deploy(client, shared("first"))
    await wait_for(lambda: running(client, "first"), timeout=15, message="first RUNNING")
    live = await de.read(deployment("shared"), NS)
    assert live is not None
    labels = live["metadata"]["labels"]
    assert (labels[LABEL_NAMESPACE], labels[LABEL_NAME], labels[LABEL_UID]) == (
        NS,
        "first",
        first.metadata.uid,
    )
    assert owner_of(live) == owner(first)
    uid = live["metadata"]["uid"]

    # the same Deployment for a second application: refused, the owner named
    await deploy(client, shared("second"))
    second = await wait_for(lambda: refused(client, "second"), timeout=10, message="CONFLICT")
    assert second.status.reason is not None
    assert "application default/first" in second.status.reason.message
    assert second.status.state is not ApplicationState.RUNNING
    assert second.status.running_on is None

    # deleting the refused one leaves the owner's Deployment alone
    await client.delete(Application, "second", NS)
    await until_gone(client, Application, "second", NS, timeout=10)
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid
    assert owner_of(live) == owner(first)
    assert await running(client, "first")

    # overwrite takes the object over; the former owner is refused from then on
    third = await deploy(client, shared("third", overwrite=True))
    await wait_for(lambda: running(client, "third"), timeout=15, message="third RUNNING")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid  # taken over, not recreated
    assert owner_of(live) == owner(third)

    async def took_over() -> list[Event]:
        events = (await client.list(Event, NS)).items
        return [e for e in events if e.reason == "TookOver" and e.involved_object.name == "third"]

    (event,) = await wait_for(took_over, timeout=10, message="TookOver event")
    assert "Deployment shared from application default/first" in event.message
    loser = await wait_for(lambda: refused(client, "first"), timeout=10, message="first refused")
    assert loser.status.reason is not None
    assert "application default/third" in loser.status.reason.message

    # deleting the former owner leaves the new owner's Deployment untouched
    await client.delete(Application, "first", NS)
    await until_gone(client, Application, "first", NS, timeout=10)
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == uid
    assert owner_of(live) == owner(third)

    # deleting the owner removes it
    await client.delete(Application, "third", NS)
    await until_gone(client, Application, "third", NS, timeout=10)
    assert await de.read(deployment("shared"), NS) is None


async def test_an_object_without_owner_is_adopted_only_with_overwrite(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    de = kube["de"]
    await de.ensure_namespace(NS)
    made = await de.apply(deployment("shared", replicas=1), NS)  # by hand, no owner
    await deploy(client, shared("careful"))
    app = await wait_for(lambda: refused(client, "careful"), timeout=10, message="CONFLICT")
    assert app.status.reason is not None
    assert "without an owner" in app.status.reason.message
    live = await de.read(deployment("shared"), NS)
    assert live is not None and owner_of(live) is None
    await client.delete(Application, "careful", NS)
    await until_gone(client, Application, "careful", NS, timeout=10)
    assert await de.read(deployment("shared"), NS) is not None  # not its own: left alone

    adopter = await deploy(client, shared("adopter", overwrite=True))
    await wait_for(lambda: running(client, "adopter"), timeout=15, message="adopted")
    live = await de.read(deployment("shared"), NS)
    assert live is not None and live["metadata"]["uid"] == made["metadata"]["uid"]
    assert owner_of(live) == owner(adopter)


async def test_two_applications_at_once_one_wins(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    created = await asyncio.gather(*(client.create(shared(n)) for n in ("left", "right")))
    await asyncio.gather(*(client.bind(app, DE) for app in created))

    async def decided() -> tuple[Application, Application] | None:
        apps = [await client.get(Application, n, NS) for n in ("left", "right")]
        won = [a for a in apps if a.status.state is ApplicationState.RUNNING]
        lost = [a for a in apps if await refused(client, a.metadata.name)]
        return (won[0], lost[0]) if len(won) == 1 and len(lost) == 1 else None

    winner, loser = await wait_for(decided, timeout=15, message="one RUNNING, one refused")
    live = await kube["de"].read(deployment("shared"), NS)
    assert owner_of(live) == owner(winner)
    assert loser.status.reason is not None
    assert f"application default/{winner.metadata.name}" in loser.status.reason.message


async def test_a_conflict_waits_longer_each_time_and_retry_tries_at_once(
    client: ShoalClient, kube: dict[str, KubeCluster], controller: KubeController
) -> None:
    await deploy(client, shared("first"))
    await wait_for(lambda: running(client, "first"), timeout=15, message="first RUNNING")
    await deploy(client, shared("second"))

    async def attempt(n: int) -> Application | None:
        app = await refused(client, "second")
        return app if app is not None and (app.status.retries or 0) >= n else None

    for n, wait in ((1, "1"), (2, "2")):
        app = await wait_for(lambda n=n: attempt(n), timeout=15, message=f"attempt {n}")
        assert app.status.reason is not None
        assert f"next in {wait} s" in app.status.reason.message, app.status.reason.message
    # the owner goes; a retry tries again without waiting, its counts reset
    await client.delete(Application, "first", NS)
    await until_gone(client, Application, "first", NS, timeout=10)
    answer = await client.request("PUT", f"/kubernetes/namespaces/{NS}/applications/second/retry")
    assert answer["status"]["retries"] is None
    # the scheduler passes a retried application at once; here, as it would, bind it again
    await client.bind(await client.get(Application, "second", NS), DE)
    await wait_for(lambda: running(client, "second"), timeout=15, message="second RUNNING")


# the ownership rule, from the live object alone -------------------------------------------

ME = Owner(NS, "web", "uid-me")


def live(labels: dict[str, str] | None = None, notes: dict[str, str] | None = None) -> Any:
    meta: dict[str, Any] = {"name": "web", "labels": labels or {}, "annotations": notes or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def never_exists(owner: Owner) -> bool:
    return False


def always_exists(owner: Owner) -> bool:
    return True


def test_only_an_object_carrying_its_owner_label_is_mine() -> None:
    assert mine(live(ME.labels), ME)
    assert mine(live(notes=ME.annotations), ME)  # labels cut: the annotations say it
    assert not mine(live(), ME)  # made by hand: never an application's
    assert not mine(live({"app": "web"}, {"note": "x"}), ME)
    assert not mine(live(Owner(NS, "web", "uid-other").labels), ME)
    assert not mine(None, ME)


def test_a_manifests_own_owner_labels_do_not_decide_who_owns_it() -> None:
    forged = live({LABEL_UID: "uid-other", LABEL_NAME: "other", "app": "web"},
                  {ANNOTATION_UID: "uid-other", "note": "kept"})  # fmt: skip
    marked = owned(forged, ME)
    assert owner_of(marked) == ME
    assert marked["metadata"]["labels"]["app"] == "web"
    assert marked["metadata"]["annotations"]["note"] == "kept"
    assert marked["metadata"]["annotations"][ANNOTATION_UID] == "uid-me"
    # a manifest naming only the annotation of another owner gets ours too
    assert owner_of(owned(live(notes={ANNOTATION_UID: "uid-other"}), ME)) == ME


def test_an_object_without_owner_is_overwritten_only_when_asked() -> None:
    obj = live()
    why = refusal(obj, live(), ME, overwrite=False, exists=always_exists)
    assert why is not None and "without an owner" in why
    assert refusal(obj, live(), ME, overwrite=True, exists=always_exists) is None
    assert refusal(obj, live(ME.labels), ME, overwrite=False, exists=always_exists) is None
    assert refusal(obj, None, ME, overwrite=False, exists=always_exists) is None
    # its own status, as the controller wrote it, records it there (imported from Krake):
    # labelled its own at the next apply; deleting it still needs the label
    assert refusal(obj, live(), ME, recorded=True, overwrite=False, exists=always_exists) is None
    assert not mine(live(), ME)


def test_an_owner_of_another_namespace_is_neither_believed_nor_named() -> None:
    """A cluster serves its own namespace's applications: another's owner label is forged
    or stale, and saying whether that application exists would tell its existence."""
    theirs = live(Owner("b", "secret-app", "uid-b").labels)
    for exists in (always_exists, never_exists):
        for overwrite in (False, True):  # never taken: a shared cluster's other tenant's
            why = refusal(live(), theirs, ME, overwrite=overwrite, exists=exists)
            assert why is not None and "another namespace" in why
            assert "secret-app" not in why and "uid-b" not in why and "b/" not in why
        assert former_owner(theirs, ME, exists) is None
    ours = Owner(NS, "first", "uid-first")
    why = refusal(live(), live(ours.labels), ME, overwrite=False, exists=always_exists)
    assert why is not None and f"application {NS}/first" in why
    assert former_owner(live(ours.labels), ME, always_exists) == ours
    assert former_owner(live(ours.labels), ME, never_exists) is None
    # left by an earlier application of the same name: taken back
    earlier = live(Owner(NS, "web", "uid-earlier").labels)
    assert refusal(live(), earlier, ME, overwrite=False, exists=never_exists) is None


async def test_an_object_whose_labels_were_cut_is_still_deleted_with_its_application(
    client: ShoalClient, kube: dict[str, KubeCluster]
) -> None:
    """The annotations name the owner where a tool stripped the labels.

    The labels are cut while no controller runs (a running one applies them again at
    once, as drift), and the application is deleted before the next one starts.
    """
    de = kube["de"]
    first = KubeController(client, poll_interval=0.2, resync=60.0, timeout=2.0)
    await first.start()
    try:
        await deploy(client, shared("cut"))
        await wait_for(lambda: running(client, "cut"), timeout=15, message="cut RUNNING")
    finally:
        await first.stop()
    path = await de.path(deployment("shared"), NS)
    strip = {"metadata": {"labels": {LABEL_UID: None, LABEL_NAME: None, LABEL_NAMESPACE: None}}}
    await de.request("PATCH", path, body=strip, content_type="application/merge-patch+json")
    stripped = await de.read(deployment("shared"), NS)
    assert stripped is not None and LABEL_UID not in (stripped["metadata"].get("labels") or {})
    await client.delete(Application, "cut", NS)
    second = KubeController(client, poll_interval=0.2, resync=60.0, timeout=2.0)
    await second.start()
    try:
        await until_gone(client, Application, "cut", NS, timeout=15)
    finally:
        await second.stop()
    assert await de.read(deployment("shared"), NS) is None


# Krake's names on a member cluster ------------------------------------------------------


def test_a_krake_name_is_carried_in_valid_labels_and_exactly_in_the_annotation() -> None:
    krake = Owner("system:admin", "GlobalInfrastructureProvider_instance:v1.2", "uid-k")
    labels = krake.labels
    for value in labels.values():
        assert len(value) <= 63 and QUALIFIED_NAME.fullmatch(value), value
    assert labels[LABEL_NAMESPACE] != "system-admin"  # not the plain form of another name
    assert krake.annotations[ANNOTATION_APP] == (
        "system:admin/GlobalInfrastructureProvider_instance:v1.2"
    )
    assert owner_of(live(labels, krake.annotations)) == krake
    assert owner_of(owned(live(), krake)) == krake
    # a name that is a label value is its own label (objects labelled before keep theirs)
    assert ME.labels[LABEL_NAMESPACE] == NS and ME.labels[LABEL_NAME] == "web"


def test_namespaces_whose_label_forms_look_alike_are_never_confused() -> None:
    """``system:admin`` and ``system-admin``: the annotation names the exact namespace,
    whichever label a tool or a tenant wrote beside it."""
    colon = Owner("system:admin", "web", "uid-colon")
    dash = Owner("system-admin", "web", "uid-dash")
    assert colon.labels[LABEL_NAMESPACE] != dash.labels[LABEL_NAMESPACE]
    for me, other in ((colon, dash), (dash, colon)):
        theirs = live(other.labels, other.annotations)
        assert owner_of(theirs) == other
        assert not mine(theirs, me)
        assert former_owner(theirs, me, always_exists) is None
        for overwrite in (False, True):
            why = refusal(live(), theirs, me, overwrite=overwrite, exists=always_exists)
            assert why is not None and "another namespace" in why
        # labels copied from the other namespace's form do not make it ours either
        forged = live({**other.labels, LABEL_NAMESPACE: me.labels[LABEL_NAMESPACE]},
                      other.annotations)  # fmt: skip
        assert owner_of(forged) == other and former_owner(forged, me, always_exists) is None
    # a label form whose annotation was cut names no application of either namespace
    cut = live(colon.labels)
    assert owner_of(cut) is not None
    assert owner_of(cut).namespace not in ("system:admin", "system-admin")  # type: ignore[union-attr]
    assert mine(cut, colon)  # the uid still says whose it is
