"""The kube controller's use of observer schemas (``shoal.model.observer_schema``).

Per application (and per copy of a placement) the controller:

- applies the manifest plus each observed field it does not set, as first
  recorded (``to_apply``, then ``recorded`` from the cluster's answer): an
  observed field put back is put back to the value it had;
- keeps, right after each apply, the observation of every object (``baseline``):
  the values as the cluster normalised them;
- applies again when a live object is gone or has another owner, or an observed
  field differs from that baseline or a list leaves its length range
  (``drifted``); a change to a field that is not observed is left alone;
- reports the observation in ``status.last_observed_manifest`` (``last_observed``),
  which is where it goes on from after a restart (``resumed``).
"""

from __future__ import annotations

from typing import Any

from shoal.copies.objects import ident
from shoal.copies.owners import owner_of
from shoal.machinery.types import Obj
from shoal.model import observer_schema as rules
from shoal.model.kubernetes import Application

Ident = tuple[str, str, str | None, str]
Baseline = dict[Ident, Obj]


def schemas(app: Application, manifest: list[Obj]) -> list[Obj]:
    """The schema in force for ``manifest`` (``status.mangled_observer_schema``)."""
    return rules.mangled(app.spec.observer_schema, manifest)


def default_schemas(manifest: list[Obj]) -> list[Obj]:
    """The schema of a copy given none: each object's default (``rules.default_schema``)."""
    return rules.mangled([], manifest)


def to_apply(manifest: list[Obj], schemas: list[Obj], previous: list[Obj]) -> list[Obj]:
    """``manifest`` with the observed fields an earlier apply recorded in ``previous``."""
    if not previous:
        return manifest
    return rules.applied(manifest, schemas, previous)


def recorded(applied: list[Obj], schemas: list[Obj], lives: list[Obj | None]) -> list[Obj]:
    """What was applied, with the observed fields it did not set as the cluster answered
    (``status.last_applied_manifest``)."""
    return rules.recorded(applied, schemas, list(lives))


def baseline(schemas: list[Obj], objects: list[Obj], lives: list[Obj | None]) -> Baseline:
    """Each object's observation right after an apply: what a later one is compared with."""
    return {
        ident(obj): rules.observe(rules.schema_for(schemas, obj), live)
        for obj, live in zip(objects, lives, strict=True)
        if live is not None
    }


def drifted(schemas: list[Obj], base: Baseline, obj: Obj, live: Obj | None) -> bool:
    """Someone else deleted ``obj`` (as applied, with its owner), changed its owner, or
    changed an observed field of it. Applying again then puts it back, or finds another
    application owns it now (a conflict)."""
    if live is None or owner_of(live) != owner_of(obj):
        return True
    before = base.get(ident(obj))
    if before is None:
        return False
    schema = rules.schema_for(schemas, obj)
    return rules.changed(schema, before, rules.observe(schema, live))


def resumed(
    schemas: list[Obj], objects: list[Obj], lives: list[Obj | None], observed: list[Obj]
) -> Baseline | None:
    """The baseline to go on from after a restart, when each object is still there, ours,
    and as ``observed`` (the last ``status.last_observed_manifest``) says in every observed
    field; None when something must be applied. A change to a field that is not observed,
    made while the controller was away, is left alone as any other."""
    base: Baseline = {}
    for obj, live in zip(objects, lives, strict=True):
        if live is None or owner_of(live) != owner_of(obj):
            return None
        schema = rules.schema_for(schemas, obj)
        before = rules.find(observed, obj)
        if before is None or rules.changed(schema, before, rules.observe(schema, live)):
            return None
        base[ident(obj)] = before
    return base


def last_observed(schemas: list[Obj], objects: list[Obj], lives: list[Any]) -> list[Obj]:
    """``status.last_observed_manifest``: the observed fields of each object that is there."""
    return [
        rules.observe(rules.schema_for(schemas, obj), live)
        for obj, live in zip(objects, lives, strict=True)
        if live is not None
    ]
