"""The kube controller's use of observer schemas, without a cluster: drift and resumption."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shoal.copies import observing
from shoal.copies.objects import ident
from shoal.copies.owners import Owner, owned
from shoal.model import observer_schema as rules

ME = Owner("default", "web", "uid-1")
OTHER = Owner("default", "shop", "uid-2")
MANIFEST: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}},
}
OBJ = owned(MANIFEST, ME)
SCHEMAS = rules.mangled([], [MANIFEST])  # the default: replicas and image observed


def _live(owner: Owner = ME, **spec: Any) -> dict[str, Any]:
    live = copy.deepcopy(owned(MANIFEST, owner))
    live["metadata"].update(namespace="default", uid="k8s-1")
    live["spec"].update(spec)
    live["status"] = {"readyReplicas": 2}
    return live


BASE = observing.baseline(SCHEMAS, [OBJ], [_live()])


@pytest.mark.parametrize(
    ("live", "drifted"),
    [
        (_live(), False),
        (_live(paused=True), False),  # not observed
        (_live(replicas=5), True),  # observed
        (None, True),  # deleted
        (_live(OTHER), True),  # taken over by another application
        ({**_live(), "metadata": {"name": "web", "namespace": "default"}}, True),  # labels cut
    ],
    ids=["same", "unobserved", "observed", "deleted", "other-owner", "no-owner"],
)
def test_drift_is_a_change_of_an_observed_field_or_of_the_object(
    live: dict[str, Any] | None, drifted: bool
) -> None:
    assert observing.drifted(SCHEMAS, BASE, OBJ, live) is drifted


@pytest.mark.parametrize(
    ("live", "observed", "resumed"),
    [
        (_live(), [BASE[ident(OBJ)]], True),
        (_live(paused=True), [BASE[ident(OBJ)]], True),  # changed meanwhile, not observed
        (_live(replicas=5), [BASE[ident(OBJ)]], False),  # changed meanwhile, observed
        (_live(), [], False),  # never observed
        (_live(OTHER), [BASE[ident(OBJ)]], False),
        (None, [BASE[ident(OBJ)]], False),
    ],
    ids=["same", "unobserved", "observed", "no-record", "other-owner", "deleted"],
)
def test_a_restart_goes_on_only_from_what_it_observed(
    live: dict[str, Any] | None, observed: list[dict[str, Any]], resumed: bool
) -> None:
    base = observing.resumed(SCHEMAS, [OBJ], [live], observed)
    assert (base is not None) is resumed
    if base is not None:
        assert base == BASE


def test_last_observed_lists_the_objects_that_are_there() -> None:
    other = {**MANIFEST, "metadata": {"name": "gone"}}
    schemas = rules.mangled([], [MANIFEST, other])
    seen = observing.last_observed(schemas, [MANIFEST, other], [_live(), None])
    assert seen == [BASE[ident(OBJ)]]
    assert seen[0]["spec"]["replicas"] == 2
