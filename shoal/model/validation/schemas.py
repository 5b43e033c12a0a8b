"""Manifest items against Kubernetes' OpenAPI schemas (the ``schemas`` install extra).

The schemas come from the ``kubernetes-validate`` package, one set per
Kubernetes version, in their strict form (unknown fields are errors, as
Kubernetes' strict field validation reports them). Each (version, apiVersion,
kind) is compiled once with ``jsonschema-rs`` and reused: a Deployment then
costs microseconds, not the milliseconds of the package's own ``validate``.
Without the extra, or with ``SHOAL_MANIFEST_SCHEMAS=off``, this step is skipped
and the structural checks of ``manifest.py`` still run. Kinds Shoal has no
schema for (custom resources) pass.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from shoal.machinery.paths import join
from shoal.model.validation.findings import Finding
from shoal.model.validation.names import labels

ENV_VERSION = "SHOAL_KUBERNETES_VERSION"
"""Kubernetes version (``1.33``) whose schemas manifests are held to; default: the newest."""
ENV_SWITCH = "SHOAL_MANIFEST_SCHEMAS"
"""``off`` turns the schema step off (the structural checks still run)."""

_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_GROUP = re.compile(r"^([^./]*)(?:\.[^/]*)?/")

Validate = Callable[[dict[str, Any]], Iterator[Any]]


def _package() -> Path | None:
    """The schemas' folder, found without importing the packages (they load on first use)."""
    found = importlib.util.find_spec("kubernetes_validate")
    if found is None or importlib.util.find_spec("jsonschema_rs") is None:
        return None
    folder = Path(next(iter(found.submodule_search_locations or ())), "kubernetes-json-schema")
    return folder if folder.is_dir() else None


@cache
def versions() -> tuple[str, ...]:
    """The Kubernetes versions (``1.37``) whose schemas are installed, oldest first."""
    root = _package()
    if root is None:
        return ()
    found = {
        m.group(1)
        for entry in root.iterdir()
        if (m := re.match(r"^v(\d+\.\d+)\.\d+-local-strict$", entry.name))
    }
    return tuple(sorted(found, key=lambda v: tuple(int(p) for p in v.split("."))))


def version() -> str | None:
    """The version in force: $SHOAL_KUBERNETES_VERSION or the newest; None when off."""
    if os.environ.get(ENV_SWITCH, "").lower() in ("off", "0", "false", "no"):
        return None
    known = versions()
    if not known:
        return None
    wanted = os.environ.get(ENV_VERSION, "").removeprefix("v")
    if not wanted:
        return known[-1]
    wanted = ".".join(wanted.split(".")[:2])
    if wanted not in known:
        raise ValueError(
            f"${ENV_VERSION}={wanted}: no manifest schemas for this Kubernetes version "
            f"(installed: {', '.join(known)})"
        )
    return wanted


def status() -> str:
    """One line for the API's start-up log: which schemas manifests are checked against."""
    try:
        current = version()
    except ValueError as error:
        return f"manifest schemas are off: {error}"
    if current is not None:
        return f"manifest schemas: Kubernetes {current} (set ${ENV_VERSION} to pick another)"
    if os.environ.get(ENV_SWITCH):
        return f"manifest schemas are off (${ENV_SWITCH})"
    return "manifest schemas are off: install shoal[schemas] to check manifests against them"


# What most manifests are made of: compiled at the API's start, not by its first creates.
_COMMON = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Pod"),
)


def warm() -> None:
    """Compile the schemas of the common kinds now (a Deployment's took 0.1 s of CPU)."""
    try:
        current = version()
    except ValueError:
        return
    if current is not None:
        for api_version, kind in _COMMON:
            _validator(current, api_version, kind)


def check(item: dict[str, Any], path: str) -> Iterator[Finding]:
    """Schema errors of one manifest item (already known to have apiVersion, kind, name)."""
    yield from _nested_labels(item.get("spec"), join(path, "spec"))
    try:
        current = version()
    except ValueError:
        return
    if current is None:
        return
    validate = _validator(current, item["apiVersion"], item["kind"])
    if validate is None:
        return
    for error in validate(item):
        yield from _finding(error, path)


_LABEL_MAPS = frozenset(("matchLabels", "labels", "nodeSelector"))


def _nested_labels(value: Any, path: str) -> Iterator[Finding]:
    """Labels and selectors inside a spec (pod templates, matchLabels) in Kubernetes' syntax.

    Every create walks its whole manifest here, so the walk descends only into mappings and
    lists, and spells a path only for the label maps it checks: 12 µs instead of 20 for a
    Deployment, spelling a path for every field was as dear as the checks."""
    found: list[Finding] = []
    parts: list[str | int] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, inner in node.items():
                if key in _LABEL_MAPS and isinstance(inner, dict):
                    found.extend(labels(inner, join(path, *parts, key)))
                elif isinstance(inner, (dict, list)):
                    parts.append(key)
                    walk(inner)
                    parts.pop()
        elif isinstance(node, list):
            for index, inner in enumerate(node):
                if isinstance(inner, (dict, list)):
                    parts.append(index)
                    walk(inner)
                    parts.pop()

    walk(value)
    return iter(found)


def _finding(error: Any, base: str) -> Iterator[Finding]:
    path = join(base, *error.instance_path)
    kind = error.kind
    name = type(kind).__name__
    if name == "AdditionalProperties":
        for field in kind.unexpected:
            yield Finding(join(path, field), "unknown field")
    elif name == "Type":
        wanted = [t for t in kind.types if t != "null"] or list(kind.types)
        yield Finding(path, f"expected {' or '.join(wanted)}")
    elif name == "Required":
        yield Finding(join(path, str(kind.property).strip('"')), "is required")
    else:
        yield Finding(path, error.message)


@cache
def _definitions(current: str) -> Any:
    import jsonschema_rs

    text = _schema_dir(current).joinpath("_definitions.json").read_text()
    return jsonschema_rs.Registry([(_DEFINITIONS_ID, json.loads(text))])


def _schema_dir(current: str) -> Path:
    root = _package()
    assert root is not None  # a version is in force only when the package is there
    pattern = re.compile(rf"^v{re.escape(current)}\.\d+-local-strict$")
    matches = [e for e in root.iterdir() if pattern.match(e.name)]
    return sorted(matches, key=lambda e: e.name)[-1]


_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")
_API_VERSION = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+[a-z0-9]{0,20}$")


def _validator(current: str, api_version: str, kind: str) -> Validate | None:
    """The compiled validator of one (version, apiVersion, kind), or None for unknown kinds.

    Only names a Kubernetes kind and apiVersion can have are looked up: a file name is made
    of them, and any other text (``../..``, a kilobyte of letters) names no schema.
    """
    if not (_KIND.match(kind) and _API_VERSION.match(api_version)):
        return None
    return _compiled(current, api_version, kind)


@lru_cache(maxsize=1024)
def _compiled(current: str, api_version: str, kind: str) -> Validate | None:
    import jsonschema_rs

    group, _, ver = api_version.rpartition("/")
    short = _GROUP.sub(r"\1-", api_version)
    entry = _schema_dir(current).joinpath(f"{kind.lower()}-{short.replace('/', '-')}.json")
    if not entry.is_file():
        return None
    schema = json.loads(entry.read_text())
    kinds = schema.get("x-kubernetes-group-version-kind") or []
    if not any(
        k.get("group", "") == group and k.get("version") == ver and k.get("kind") == kind
        for k in kinds
    ):
        return None  # not a top-level built-in kind (or a custom resource of the same name)
    compiled = jsonschema_rs.validator_for(schema, registry=_definitions(current))
    return compiled.iter_errors
