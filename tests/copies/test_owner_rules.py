"""The ownership rules, table by table: who owns a live object, and who may apply or delete it.

Each row is a live object as a member cluster holds it and the application that wants it;
the answer is the rule's decision (the reason of a refusal, the owner read, whether it may
be deleted). The controller's part (applying, deleting, the events) is tested against sim
clusters in tests/kube/test_owners.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from shoal.copies.owners import (
    ANNOTATION_APP,
    ANNOTATION_UID,
    LABEL_NAME,
    LABEL_NAMESPACE,
    LABEL_UID,
    Owner,
    describe,
    former_owner,
    mine,
    owned,
    owner_of,
    refusal,
)
from shoal.model.kubernetes import Application

WEB_A = Owner("team-a", "web", "uid-a-web")  # team-a's web, deleted in the rows that say so
WEB_B = Owner("team-b", "web", "uid-b-web")  # team-b's web: the same name, another tenant
API_A = Owner("team-a", "api", "uid-a-api")
WEB_A_AGAIN = Owner("team-a", "web", "uid-a-web-2")  # team-a's web, created again


def live(labels: dict[str, str] | None = None, notes: dict[str, str] | None = None,
         namespace: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": "web", "labels": labels or {}, "annotations": notes or {}}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def left_by(owner: Owner) -> dict[str, Any]:
    """An object as Shoal applied it for ``owner``: its labels and annotations."""
    return live(owner.labels, owner.annotations)


def labels_cut(owner: Owner) -> dict[str, Any]:
    """``owner``'s object after a tool stripped its labels: only the annotations say whose."""
    return live(notes=owner.annotations)


def existing(*owners: Owner) -> Any:
    uids = {o.uid for o in owners}
    return lambda owner: owner.uid in uids


# owner_of: who owns a live object --------------------------------------------------------

OWNER_OF = [
    ("nothing there", None, None),
    ("made by hand", live({"app": "web"}, {"note": "x"}), None),
    ("labels and annotations", left_by(WEB_A), WEB_A),
    ("labels cut: the annotations say it", labels_cut(WEB_A), WEB_A),
    ("annotations cut: the labels say it", live(WEB_A.labels), WEB_A),
    # the annotation names the exact namespace and name; the labels carry only the uid
    (
        "the annotation decides the names",
        live({**WEB_A.labels, LABEL_NAMESPACE: "team-b", LABEL_NAME: "api"}, WEB_A.annotations),
        WEB_A,
    ),
    (
        "the label's uid before the annotation's",
        live(WEB_A.labels, {**WEB_A.annotations, ANNOTATION_UID: "uid-other"}),
        WEB_A,
    ),
    (
        "an empty uid label falls back to the annotation",
        live({**WEB_A.labels, LABEL_UID: ""}, WEB_A.annotations),
        WEB_A,
    ),
    (
        "names without a uid name no owner",
        live({LABEL_NAMESPACE: "team-a", LABEL_NAME: "web"}, {ANNOTATION_APP: "team-a/web"}),
        None,
    ),
    ("a uid with no name anywhere", live({LABEL_UID: "uid-x"}), Owner("", "", "uid-x")),
    # a namespace holds no "/": the first one ends it, whatever the rest of the annotation
    (
        "a forged name holding a slash stays in its namespace",
        live(notes={ANNOTATION_UID: "uid-x", ANNOTATION_APP: "team-a/web/x"}),
        Owner("team-a", "web/x", "uid-x"),
    ),
]


@pytest.mark.parametrize(("live_obj", "expected"), [row[1:] for row in OWNER_OF],
                         ids=[row[0] for row in OWNER_OF])  # fmt: skip
def test_owner_of(live_obj: dict[str, Any] | None, expected: Owner | None) -> None:
    assert owner_of(live_obj) == expected


def test_an_object_without_metadata_has_no_owner() -> None:
    assert owner_of({"kind": "ConfigMap"}) is None
    assert owner_of({"kind": "ConfigMap", "metadata": None}) is None
    assert (
        owner_of({"kind": "ConfigMap", "metadata": {"labels": None, "annotations": None}}) is None
    )


# refusal: may an application apply its object over what lives there -----------------------

OWNED = "is owned by application team-a/api (uid uid-a-api)"
NO_OWNER = "exists without an owner (spec.conflict_resolution: overwrite adopts it)"
FOREIGN = "belongs to an application of another namespace: never taken over"

REFUSAL: list[
    tuple[str, dict[str, Any] | None, Owner, tuple[Owner, ...], bool, bool, str | None]
] = [
    # (case, live, me, applications that exist, overwrite, recorded, refusal or None)
    ("nothing there", None, WEB_A, (WEB_A,), False, False, None),
    ("its own object", left_by(WEB_A), WEB_A, (WEB_A,), False, False, None),
    ("its own object, labels cut", labels_cut(WEB_A), WEB_A, (WEB_A,), False, False, None),
    ("another live application's", left_by(API_A), WEB_A, (WEB_A, API_A), False, False, OWNED),
    (
        "another live application's, overwrite",
        left_by(API_A),
        WEB_A,
        (WEB_A, API_A),
        True,
        False,
        None,
    ),
    (
        "another live application's, labels cut",
        labels_cut(API_A),
        WEB_A,
        (WEB_A, API_A),
        False,
        False,
        OWNED,
    ),
    (
        "another live application's, recorded",
        left_by(API_A),
        WEB_A,
        (WEB_A, API_A),
        False,
        True,
        OWNED,
    ),
    # a deleted application's leftovers: its namesake (created again) takes them back
    ("left by a deleted namesake", left_by(WEB_A), WEB_A_AGAIN, (WEB_A_AGAIN,), False, False, None),
    (
        "left by a deleted namesake, labels cut",
        labels_cut(WEB_A),
        WEB_A_AGAIN,
        (WEB_A_AGAIN,),
        False,
        False,
        None,
    ),
    # ... another application of the namespace only with overwrite, as an object without owner
    (
        "left by a deleted other application",
        left_by(API_A),
        WEB_A,
        (WEB_A,),
        False,
        False,
        NO_OWNER,
    ),
    (
        "left by a deleted other application, overwrite",
        left_by(API_A),
        WEB_A,
        (WEB_A,),
        True,
        False,
        None,
    ),
    (
        "left by a deleted other application, recorded",
        left_by(API_A),
        WEB_A,
        (WEB_A,),
        False,
        True,
        None,
    ),
    # team-b/web never takes what team-a/web left, deleted or not, overwrite or not
    (
        "team-a's web, deleted, wanted by team-b's web",
        left_by(WEB_A),
        WEB_B,
        (WEB_B,),
        False,
        False,
        FOREIGN,
    ),
    (
        "team-a's web, deleted, wanted by team-b's web, overwrite",
        left_by(WEB_A),
        WEB_B,
        (WEB_B,),
        True,
        False,
        FOREIGN,
    ),
    (
        "team-a's web, deleted, wanted by team-b's web, recorded",
        left_by(WEB_A),
        WEB_B,
        (WEB_B,),
        False,
        True,
        FOREIGN,
    ),
    (
        "team-a's web, live, wanted by team-b's web",
        left_by(WEB_A),
        WEB_B,
        (WEB_A, WEB_B),
        True,
        False,
        FOREIGN,
    ),
    (
        "team-a's web, labels cut, wanted by team-b's web",
        labels_cut(WEB_A),
        WEB_B,
        (WEB_B,),
        True,
        False,
        FOREIGN,
    ),
    # an object nobody owns
    ("without an owner", live(), WEB_A, (WEB_A,), False, False, NO_OWNER),
    ("without an owner, overwrite", live(), WEB_A, (WEB_A,), True, False, None),
    ("without an owner, recorded in its status", live(), WEB_A, (WEB_A,), False, True, None),
]


@pytest.mark.parametrize(("live_obj", "me", "exist", "overwrite", "recorded", "expected"),
                         [row[1:] for row in REFUSAL], ids=[row[0] for row in REFUSAL])  # fmt: skip
def test_refusal(live_obj: dict[str, Any] | None, me: Owner, exist: tuple[Owner, ...],
                 overwrite: bool, recorded: bool, expected: str | None) -> None:  # fmt: skip
    obj = live(namespace="shop")
    why = refusal(obj, live_obj, me, recorded=recorded, overwrite=overwrite,
                  exists=existing(*exist))  # fmt: skip
    if expected is None:
        assert why is None
        return
    assert why == f"Deployment web in namespace shop {expected}"


def test_a_refusal_names_the_owner_of_the_same_namespace_exactly() -> None:
    why = refusal(live(), left_by(API_A), WEB_A, overwrite=False, exists=existing(API_A))
    assert why == "Deployment web is owned by application team-a/api (uid uid-a-api)"


def test_whether_the_owner_exists_is_asked_only_in_the_namespace() -> None:
    """Another namespace's application is never looked up: the answer would tell a tenant
    whether another's application exists."""
    asked: list[Owner] = []

    def exists(owner: Owner) -> bool:
        asked.append(owner)
        return False

    refusal(live(), left_by(WEB_A), WEB_B, overwrite=True, exists=exists)
    assert former_owner(left_by(WEB_A), WEB_B, exists) is None
    assert asked == []
    refusal(live(), left_by(API_A), WEB_A, overwrite=False, exists=exists)
    assert asked == [API_A]


# mine: may an application delete a live object ---------------------------------------------

MINE = [
    ("its labels", left_by(WEB_A), WEB_A, True),
    ("labels cut: its annotations", labels_cut(WEB_A), WEB_A, True),
    ("annotations cut: its labels", live(WEB_A.labels), WEB_A, True),
    ("nothing there", None, WEB_A, False),
    ("made by hand", live({"app": "web"}), WEB_A, False),
    ("another application's", left_by(API_A), WEB_A, False),
    ("its deleted namesake's", left_by(WEB_A), WEB_A_AGAIN, False),
    ("another namespace's namesake's", left_by(WEB_A), WEB_B, False),
    ("another namespace's, labels cut", labels_cut(WEB_A), WEB_B, False),
]


@pytest.mark.parametrize(("live_obj", "me", "expected"), [row[1:] for row in MINE],
                         ids=[row[0] for row in MINE])  # fmt: skip
def test_mine(live_obj: dict[str, Any] | None, me: Owner, expected: bool) -> None:
    assert mine(live_obj, me) is expected


# former_owner: the live application an object is taken from (conflict_resolution) ----------

FORMER = [
    ("another live application's", left_by(API_A), WEB_A, (API_A,), API_A),
    ("another live application's, labels cut", labels_cut(API_A), WEB_A, (API_A,), API_A),
    ("a deleted application's", left_by(API_A), WEB_A, (), None),
    ("its own", left_by(WEB_A), WEB_A, (WEB_A,), None),
    ("without an owner", live(), WEB_A, (WEB_A,), None),
    ("nothing there", None, WEB_A, (WEB_A,), None),
    ("another namespace's live application's", left_by(WEB_B), WEB_A, (WEB_B,), None),
]


@pytest.mark.parametrize(("live_obj", "me", "exist", "expected"), [row[1:] for row in FORMER],
                         ids=[row[0] for row in FORMER])  # fmt: skip
def test_former_owner(live_obj: dict[str, Any] | None, me: Owner, exist: tuple[Owner, ...],
                      expected: Owner | None) -> None:  # fmt: skip
    assert former_owner(live_obj, me, existing(*exist)) == expected


# owned: what Shoal applies names its owner, whatever the manifest said ----------------------


def test_a_manifests_own_owner_labels_and_annotations_are_replaced() -> None:
    forged = live({LABEL_UID: WEB_B.uid, LABEL_NAME: "api", "shoal.dev/extra": "x", "app": "web"},
                  {ANNOTATION_UID: WEB_B.uid, ANNOTATION_APP: "team-b/web",
                   "shoal.dev/note": "y", "note": "kept"})  # fmt: skip
    marked = owned(forged, WEB_A)
    assert owner_of(marked) == WEB_A
    assert marked["metadata"]["labels"] == {**WEB_A.labels, "app": "web"}
    assert marked["metadata"]["annotations"] == {**WEB_A.annotations, "note": "kept"}
    # the manifest itself is left as it was
    assert forged["metadata"]["labels"][LABEL_UID] == WEB_B.uid
    assert forged["metadata"]["annotations"][ANNOTATION_APP] == "team-b/web"
    assert not mine(owned(live(), WEB_B), WEB_A)


@pytest.mark.parametrize("metadata", [None, {}, {"labels": None, "annotations": None},
                                      {"labels": ["x"], "annotations": "y"}])  # fmt: skip
def test_an_object_without_labels_gets_its_owners(metadata: Any) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"a": "b"}}
    marked = owned(obj, WEB_A)
    assert marked["metadata"]["labels"] == WEB_A.labels
    assert marked["metadata"]["annotations"] == WEB_A.annotations
    assert marked["data"] == {"a": "b"} and marked["kind"] == "ConfigMap"


# an owner's names -------------------------------------------------------------------------


def test_an_owners_labels_annotations_selector_and_name() -> None:
    assert WEB_A.labels == {LABEL_NAMESPACE: "team-a", LABEL_NAME: "web", LABEL_UID: "uid-a-web"}
    assert WEB_A.annotations == {ANNOTATION_APP: "team-a/web", ANNOTATION_UID: "uid-a-web"}
    assert WEB_A.selector == "shoal.dev/app-uid=uid-a-web"
    assert str(WEB_A) == "application team-a/web (uid uid-a-web)"


def test_the_owner_of_an_application() -> None:
    app = Application.model_validate(
        {"metadata": {"name": "web", "namespace": "team-a", "uid": "uid-a-web"},
         "spec": {"manifest": []}})  # fmt: skip
    assert Owner.of(app) == WEB_A
    bare = Application.model_validate({"metadata": {"name": "web"}, "spec": {"manifest": []}})
    bare.metadata.namespace = None
    bare.metadata.uid = None
    assert Owner.of(bare) == Owner("default", "web", "")


def test_describe_names_kind_name_and_namespace() -> None:
    assert describe(live(namespace="shop")) == "Deployment web in namespace shop"
    assert describe(live()) == "Deployment web"
    assert describe({"kind": "ConfigMap"}) == "ConfigMap None"
