"""An Application's manifest, checked as ``kubectl apply --dry-run=server`` would.

Structure first (each item a mapping with apiVersion, kind and a valid
metadata.name, no two items for the same object, labels in Kubernetes'
syntax), then the item against its kind's OpenAPI schema where Shoal has one
(``shoal.model.validation.schemas``): custom resources pass that step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shoal.machinery.paths import join
from shoal.model.validation import schemas as schemas
from shoal.model.validation.findings import Finding, type_name
from shoal.model.validation.names import control_character, dns_label, dns_subdomain, labels

# Namespaces and Services are named by a DNS-1123 label (they become DNS records);
# every other name is a DNS-1123 subdomain.
_LABEL_NAMED_STRICT = frozenset({"Namespace", "Service"})


def check_manifest(items: Any, path: str) -> Iterator[Finding]:
    if not isinstance(items, list) or not items:
        yield Finding(path, "must list at least one Kubernetes object (or give spec.tosca)")
        return
    seen: dict[tuple[str, str, str, str], int] = {}
    for index, item in enumerate(items):
        where = join(path, index)
        problems = list(_structure(item, where))
        if problems:
            yield from problems
            continue
        meta = item["metadata"]
        group = item["apiVersion"].rpartition("/")[0]
        key = (group, item["kind"], str(meta.get("namespace") or ""), meta["name"])
        if key in seen:
            yield Finding(
                join(where, "metadata", "name"),
                f"{item['kind']} {meta['name']!r} is already item {seen[key]} of the manifest",
            )
            continue
        seen[key] = index
        yield from schemas.check(item, where)


def _structure(item: Any, path: str) -> Iterator[Finding]:
    if not isinstance(item, dict):
        yield Finding(path, f"must be a Kubernetes object (a mapping), not {type_name(item)}")
        return
    for field in ("apiVersion", "kind"):
        value = item.get(field)
        if not isinstance(value, str) or not value:
            yield Finding(join(path, field), "is required (a non-empty string)")
        elif (reason := control_character(value)) is not None:
            yield Finding(join(path, field), reason)
    meta = item.get("metadata")
    if not isinstance(meta, dict):
        yield Finding(join(path, "metadata"), "is required (an object with a name)")
        return
    name = meta.get("name")
    where = join(path, "metadata", "name")
    if not isinstance(name, str) or not name:
        yield Finding(where, "is required (a non-empty string)")
    elif (reason := control_character(name)) is not None:
        yield Finding(where, reason)
    else:
        kind = item.get("kind")
        strict = isinstance(kind, str) and kind in _LABEL_NAMED_STRICT
        rule = dns_label if strict else dns_subdomain
        if (reason := rule(name)) is not None:
            yield Finding(where, reason)
    namespace = meta.get("namespace")
    if namespace is not None:
        ns_where = join(path, "metadata", "namespace")
        if not isinstance(namespace, str):
            yield Finding(ns_where, "must be a string")
        elif (reason := dns_label(namespace)) is not None:
            yield Finding(ns_where, reason)
    yield from labels(meta.get("labels"), join(path, "metadata", "labels"))
    annotations = meta.get("annotations")
    if annotations is not None and (
        not isinstance(annotations, dict)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        yield Finding(join(path, "metadata", "annotations"), "must map keys to strings")
