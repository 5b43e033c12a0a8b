"""Wrong bodies of every kind, each with the field the API must name (shared by API and CLI tests).

A case edits a valid sample body of its kind (``tests.api.samples``): it sets
``path`` (dotted, digits index lists) to ``value``, or removes it (``DROP``),
or calls a function. The answer must be a 422 whose ``errors`` name ``field``
(by default the path that was set, spelled ``a.b[0].c``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.api.samples import BY_KIND, Body

DROP = object()


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    path: str | Callable[[Body], None]
    value: Any = DROP
    field: str = ""

    def expected(self) -> str:
        if self.field or not isinstance(self.path, str):
            return self.field
        return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", self.path)

    def body(self, name: str = "bad") -> Body:
        sample = BY_KIND[self.kind]
        body = sample.body(name, "default" if sample.namespaced else None)
        if not isinstance(self.path, str):
            self.path(body)
            return body
        *parents, last = self.path.split(".")
        target: Any = body
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        key: Any = int(last) if last.isdigit() else last
        if self.value is DROP:
            del target[key]
        else:
            target[key] = copy.deepcopy(self.value)
        return body


def _twice(body: Body) -> None:
    manifest = body["spec"]["manifest"]
    manifest.append(copy.deepcopy(manifest[0]))


def _second_context(body: Body) -> None:
    config = body["spec"]["kubeconfig"]
    config["contexts"].append({"name": "other", "context": {"cluster": "c", "user": "u"}})
    config["current-context"] = ""


KC = "spec.kubeconfig"
M0 = "spec.manifest.0"
T0 = f"{M0}.spec.template"
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web.svc"},
           "spec": {"ports": [{"port": 80}]}}  # fmt: skip
# A scheme other than HTTP's (Krake takes any other string: test_krake.py)
PROMETHEUS = {"type": "prometheus", "prometheus": {"url": "gopher://localhost:9090"}}

CASES: list[Case] = [
    # clusters: the kubeconfig as the Kubernetes client loads it
    Case("cluster-no-spec", "Cluster", "spec", field=KC),
    Case("cluster-empty-kubeconfig", "Cluster", KC, {}),
    Case("cluster-kubeconfig-string", "Cluster", KC, "apiVersion: v1"),
    Case("current-context-unknown", "Cluster", f"{KC}.current-context", "nope"),
    Case("two-contexts-none-current", "Cluster", _second_context, field=f"{KC}.current-context"),
    Case("context-false", "Cluster", f"{KC}.contexts.0.context", False),
    Case("context-user-unknown", "Cluster", f"{KC}.contexts.0.context.user", "ghost"),
    Case("context-cluster-unknown", "Cluster", f"{KC}.contexts.0.context.cluster", "x"),
    Case("server-not-url", "Cluster", f"{KC}.clusters.0.cluster.server", "not a url"),
    Case("server-ftp", "Cluster", f"{KC}.clusters.0.cluster.server", "ftp://h"),
    Case("user-no-credential", "Cluster", f"{KC}.users.0.user", {}),
    Case("user-exec-no-command", "Cluster", f"{KC}.users.0.user", {"exec": {"args": []}},
         f"{KC}.users[0].user.exec"),
    Case("no-contexts", "Cluster", f"{KC}.contexts", []),
    Case("context-without-name", "Cluster", f"{KC}.contexts.0.name", ""),
    Case("cluster-metric-nul", "Cluster", "spec.metrics", [{"name": "lo\x00ad", "weight": 1}],
         "spec.metrics[0].name"),
    Case("cluster-label-key", "Cluster", "metadata.labels", {"-bad": "x"}),
    # applications: the manifest as Kubernetes would take it
    Case("manifest-empty", "Application", "spec.manifest", []),
    Case("manifest-missing", "Application", "spec.manifest"),
    Case("template-null-list", "Application", T0, [None]),
    Case("replicas-three", "Application", f"{M0}.spec.replicas", "three"),
    Case("match-labels-null", "Application", f"{M0}.spec.selector.matchLabels.app", None),
    Case("name-nul", "Application", f"{M0}.metadata.name", "we\x00b"),
    Case("name-upper", "Application", f"{M0}.metadata.name", "Web_App"),
    Case("name-missing", "Application", f"{M0}.metadata.name"),
    Case("service-name-dots", "Application", "spec.manifest", [SERVICE],
         "spec.manifest[0].metadata.name"),
    Case("duplicate-items", "Application", _twice, field="spec.manifest[1].metadata.name"),
    Case("placement-no-clusters", "Application", "spec.placement", {"clusters": 0},
         field="spec.placement.clusters"),
    Case("placement-spread-by-key", "Application", "spec.placement", {"spread_by": "a b"},
         field="spec.placement.spread_by"),
    Case("placement-weights-duplicated", "Application", "spec.placement", {"weights": "dynamic"},
         field="spec.placement"),
    Case("placement-weights-all-zero", "Application", "spec.placement",
         {"replicas": "divided", "weights": [{"clusters": "location is DE", "weight": 0}]},
         field="spec.placement.weights"),
    Case("placement-fallback-grammar", "Application", "spec.placement",
         {"fallback": ["location is"]}, field="spec.placement.fallback[0]"),
    Case("placement-override-renames", "Application", "spec.placement",
         {"overrides": [{"clusters": "location is DE", "patch": {
             "kind": "Deployment", "name": "web", "merge": {"metadata": {"name": "x"}}}}]},
         field="spec.placement.overrides[0].patch.merge"),
    Case("item-string", "Application", M0, "kind: Deployment"),
    Case("item-no-kind", "Application", f"{M0}.kind"),
    Case("item-no-api-version", "Application", f"{M0}.apiVersion"),
    Case("item-no-metadata", "Application", f"{M0}.metadata"),
    Case("unknown-field", "Application", f"{T0}.spec.containers.0.imagePullPolicyy", "Always"),
    Case("no-selector", "Application", f"{M0}.spec.selector"),
    Case("item-label-value", "Application", f"{M0}.metadata.labels", {"app": "a b"},
         "spec.manifest[0].metadata.labels.app"),
    Case("app-label-value", "Application", "metadata.labels", {"tier": "front end"}),
    Case("label-constraint", "Application", "spec.constraints.cluster.labels", ["loc is"],
         "spec.constraints.cluster.labels[0]"),
    # roles and bindings
    Case("role-empty-rule", "Role", "rules", [{}], "rules[0].api"),
    Case("role-api-empty", "Role", "rules.0.api", ""),
    Case("role-api-unknown", "Role", "rules.0.api", "apps"),
    Case("role-resource-unknown", "Role", "rules.0.resources.0", "widgets"),
    Case("role-no-resources", "Role", "rules.0.resources", []),
    Case("role-no-verbs", "Role", "rules.0.verbs", []),
    Case("role-verb-unknown", "Role", "rules.0.verbs.0", "fly"),
    Case("binding-user-empty", "RoleBinding", "users.0", ""),
    Case("binding-role-nul", "RoleBinding", "roles.0", "re\x00ader"),
    # metrics and providers
    Case("metric-provider-nul", "GlobalMetric", "spec.provider.name", "\x00"),
    Case("metric-provider-blank", "Metric", "spec.provider.name", " "),
    Case("metric-min-max", "GlobalMetric", "spec.max", 0, "spec"),
    Case("metric-name-control", "Metric", "spec.provider.metric", "lo\x01ad"),
    Case("provider-url", "GlobalMetricsProvider", "spec", PROMETHEUS, "spec.prometheus.url"),
    # clouds and fleet pods
    Case("cloud-provider-ref", "Cloud", "spec.openstack.infrastructure_provider", {"name": ""},
         "spec.openstack.infrastructure_provider.name"),
    Case("pod-no-containers", "Pod", "spec.containers", []),
]  # fmt: skip
