"""Just enough OpenAPI for kubectl.

kubectl (1.27+) asks the OpenAPI v3 document of a group/version whether the
server supports ``fieldValidation`` on PATCH for a kind; when it does, kubectl
leaves validation to the server and skips client-side schema validation. So each
group/version document lists every resource path with a PATCH operation that
carries the kind and the ``fieldValidation`` parameter; schemas are open
objects. The documents deliberately do not offer strategic merge patch, so
``kubectl apply`` computes its patches from its compiled-in types instead of
from these (schema-less) documents. ``kubectl explain`` therefore has nothing to
explain. OpenAPI v2 is not served (404), which kubectl tolerates.
"""

from __future__ import annotations

import hashlib

import orjson

from shoal.machinery.types import Obj
from shoal.sim.resources import Registry, ResourceType

_PARAMS = [
    {"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for n in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")
]


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_gv(reg: Registry, gv_path: str) -> Obj | None:
    """The v3 document of one group/version (``api/v1``, ``apis/apps/v1``)."""
    parts = gv_path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    rts = reg.resources_in(group, version)
    if not rts:
        return None
    paths: Obj = {}
    schemas: Obj = {}
    for rt in rts:
        schema_name = _schema_name(rt)
        schemas[schema_name] = {
            "type": "object",
            "x-kubernetes-group-version-kind": [
                {"group": rt.group, "version": rt.version, "kind": rt.kind}
            ],
            "x-kubernetes-preserve-unknown-fields": True,
        }
        ref = {"$ref": f"#/components/schemas/{schema_name}"}
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        item = rt.base_path("{namespace}") + "/{name}"
        body_types = ["application/json-patch+json", "application/merge-patch+json",
                      "application/apply-patch+yaml"]
        paths[item] = {
            "get": {
                "operationId": f"read{rt.kind}",
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK",
                                      "content": {"application/json": {"schema": ref}}}},
            },
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": _PARAMS,
                "requestBody": {"content": {t: {"schema": {"type": "object"}}
                                            for t in body_types}},
                "responses": {"200": {"description": "OK",
                                      "content": {"application/json": {"schema": ref}}}},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (shoal sim)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


def openapi_v3_root(reg: Registry) -> Obj:
    """The v3 discovery document; the hash changes whenever the served types change."""
    gvs = {("", "v1")}
    for rt in reg.by_path.values():
        gvs.add((rt.group, rt.version))
    paths: Obj = {}
    for group, version in sorted(gvs):
        key = _gv_key(group, version)
        names = sorted(f"{rt.plural}/{rt.kind}" for rt in reg.resources_in(group, version))
        digest = hashlib.sha1(orjson.dumps(names)).hexdigest().upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def openapi_v2(reg: Registry) -> Obj | None:
    """Not served; kubectl falls back to its compiled-in types."""
    return None
