"""The resource types a simulated cluster serves, and the discovery documents built from them.

Built-in types are fixed; custom resources are added when their CRD is created and
removed with it, so discovery is always rebuilt from the live registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.machinery.types import Obj

DEFAULT_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass
class ResourceType:
    """One served resource (a Kubernetes APIResource), with its storage key."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    subresources: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    crd: str | None = None  # name of the defining CRD for custom resources
    printer_columns: list[Obj] = field(default_factory=list)

    @property
    def key(self) -> str:
        """Storage key: one bucket per group and plural, independent of version."""
        return f"{self.group}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def base_path(self, namespace: str | None) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def api_resources(self) -> list[Obj]:
        """APIResource entries (the resource and its subresources) for discovery."""
        main: Obj = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": DEFAULT_VERBS,
        }
        if self.short_names:
            main["shortNames"] = self.short_names
        if self.categories:
            main["categories"] = self.categories
        out = [main]
        for sub in self.subresources:
            if sub == "status":
                out.append(
                    {
                        "name": f"{self.plural}/status",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "kind": self.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            elif sub == "scale":
                out.append(
                    {
                        "name": f"{self.plural}/scale",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            elif sub == "binding":
                out.append(
                    {
                        "name": f"{self.plural}/binding",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Binding",
                        "verbs": ["create"],
                    }
                )
        return out


BUILTIN: list[ResourceType] = [
    ResourceType("", "v1", "Namespace", "namespaces", False, ["ns"], ["status"]),
    ResourceType("", "v1", "Node", "nodes", False, ["no"], ["status"]),
    ResourceType("", "v1", "Pod", "pods", True, ["po"], ["status", "binding"], ["all"]),
    ResourceType("", "v1", "Service", "services", True, ["svc"], ["status"], ["all"]),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, ["cm"]),
    ResourceType("", "v1", "Secret", "secrets", True),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ["sa"]),
    ResourceType("", "v1", "Endpoints", "endpoints", True, ["ep"]),
    ResourceType("", "v1", "Event", "events", True, ["ev"]),
    ResourceType("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ["pvc"]),
    ResourceType("", "v1", "PersistentVolume", "persistentvolumes", False, ["pv"]),
    ResourceType("", "v1", "ResourceQuota", "resourcequotas", True, ["quota"]),
    ResourceType("", "v1", "LimitRange", "limitranges", True, ["limits"]),
    ResourceType("apps", "v1", "Deployment", "deployments", True, ["deploy"],
                 ["status", "scale"], ["all"]),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, ["rs"],
                 ["status", "scale"], ["all"]),
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", True, ["sts"],
                 ["status", "scale"], ["all"]),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", True, ["ds"], ["status"], ["all"]),
    ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    ResourceType("batch", "v1", "Job", "jobs", True, [], ["status"], ["all"]),
    ResourceType("batch", "v1", "CronJob", "cronjobs", True, ["cj"], ["status"], ["all"]),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                 "customresourcedefinitions", False, ["crd", "crds"], ["status"]),
]


class Registry:
    """Resource types by (group, version, plural); rebuilt as CRDs come and go."""

    def __init__(self) -> None:
        self.by_path: dict[tuple[str, str, str], ResourceType] = {}
        self.by_key: dict[str, ResourceType] = {}
        self.by_gvk: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self.by_path[(rt.group, rt.version, rt.plural)] = rt
        self.by_gvk[(rt.group, rt.version, rt.kind)] = rt
        self.by_key.setdefault(rt.key, rt)

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        gone = [rt for rt in self.by_path.values() if rt.crd == crd_name]
        for rt in gone:
            self.by_path.pop((rt.group, rt.version, rt.plural), None)
            self.by_gvk.pop((rt.group, rt.version, rt.kind), None)
            if self.by_key.get(rt.key) is rt:
                del self.by_key[rt.key]
                for other in self.by_path.values():
                    if other.key == rt.key:
                        self.by_key[rt.key] = other
                        break
        return gone

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self.by_path.get((group, version, plural))
        if rt is None:
            # accept a short name or singular name in the URL, as kubectl never does
            # but people typing curl commands sometimes do
            for cand in self.by_path.values():
                if (cand.group, cand.version) == (group, version) and (
                    plural == cand.singular or plural in cand.short_names
                ):
                    return cand
        return rt

    def groups(self) -> dict[str, list[str]]:
        """Group name → served versions (core group excluded), preferred first."""
        out: dict[str, list[str]] = {}
        for rt in self.by_path.values():
            if rt.group:
                versions = out.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return out

    def resources_in(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.by_path.values() if (rt.group, rt.version) == (group, version)]

    # -- discovery documents -------------------------------------------------

    def api_versions(self) -> Obj:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }

    def api_group(self, group: str) -> Obj | None:
        versions = self.groups().get(group)
        if not versions:
            return None
        vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": vs,
            "preferredVersion": vs[0],
        }

    def api_group_list(self) -> Obj:
        groups = []
        for group in self.groups():
            g = self.api_group(group)
            if g is not None:
                g.pop("kind")
                g.pop("apiVersion")
                groups.append(g)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group: str, version: str) -> Obj | None:
        rts = self.resources_in(group, version)
        if not rts:
            return None
        resources: list[Obj] = []
        for rt in rts:
            resources.extend(rt.api_resources())
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }
