"""Default roles, created at the first start of an RBAC server: admins and each component.

Each component gets only what it does: the scheduler reads the fleet and
metrics and writes bindings and status; the kube controller and the cluster
observer read kubeconfigs (``secrets`` on clusters); the infrastructure
controller reads the providers' and clouds' logins and writes the kubeconfigs
of the clusters it builds; the garbage collector
updates and deletes but never reads a secret in clear (an update that sends
the redacted placeholder back keeps the stored value). Components run as
``system:<component>``; anyone in group ``shoal:admins`` may do everything.
"""

from __future__ import annotations

import uuid

from shoal.api.codec import encode
from shoal.model.base import Metadata, utcnow
from shoal.model.core import Role, RoleBinding, RoleRule
from shoal.store.base import AlreadyExists, Store

ADMINS = "shoal:admins"
COMPONENTS = (
    "scheduler",
    "kube-controller",
    "cluster-observer",
    "garbage-collector",
    "reschedule-controller",
    "infrastructure-controller",
    "agent",
)

_READ = ["get", "list", "list_all", "watch"]
_LEASES = RoleRule(api="core", resources=["leases"], namespaces=["*"], verbs=["*"])
# Every component reports what it does as events (docs/observability.md).
_EVENTS = RoleRule(api="core", resources=["events"], namespaces=["*"], verbs=["create"])


def _rule(api: str, resources: list[str], verbs: list[str]) -> RoleRule:
    return RoleRule(api=api, resources=resources, namespaces=["*"], verbs=verbs)


_RULES: dict[str, list[RoleRule]] = {
    "admin": [_rule("*", ["*"], ["*"])],
    "scheduler": [
        _rule("kubernetes", ["applications", "clusters"], _READ),
        _rule("kubernetes", ["clusters"], ["update"]),  # its eviction finalizer
        _rule("infrastructure", ["clouds", "globalclouds"], _READ),
        _rule("core", ["metrics", "globalmetrics"], _READ),
        _rule("core", ["metricsproviders", "globalmetricsproviders"], [*_READ, "secrets"]),
        _rule(
            "core",
            ["metricsproviders/status", "globalmetricsproviders/status"],
            ["update"],
        ),
        _rule(
            "kubernetes",
            ["applications/status", "applications/binding", "clusters/status", "clusters/binding"],
            ["update"],
        ),
        _rule("infrastructure", ["clouds/status", "globalclouds/status"], ["update"]),
        _rule("scheduling", ["pods"], _READ),  # fleet pods (docs/fleet.md)
        _rule("scheduling", ["pods/status"], ["update"]),
        # the configuration it decides with, for the API's dry run
        _rule("scheduling", ["schedulerconfigurations"], [*_READ, "create", "update"]),
        _LEASES,
        _EVENTS,
    ],
    "kube-controller": [
        _rule("kubernetes", ["applications"], [*_READ, "update", "delete"]),
        _rule("kubernetes", ["clusters"], [*_READ, "secrets"]),
        _rule("kubernetes", ["applications/status", "clusters/status"], ["update"]),
        # the copies of pull clusters (docs/pull-mode.md); reading them is reading applications
        _rule("kubernetes", ["copies", "copies/finalizers"], ["create", "update", "delete"]),
        _LEASES,
        _EVENTS,
    ],
    "cluster-observer": [
        _rule("kubernetes", ["clusters"], [*_READ, "secrets"]),
        _rule("kubernetes", ["clusters/status"], ["update"]),
        _LEASES,
        _EVENTS,
    ],
    "garbage-collector": [_rule("*", ["*"], [*_READ, "update", "delete"]), _LEASES, _EVENTS],
    "reschedule-controller": [
        _rule("kubernetes", ["applications", "clusters"], _READ),
        _rule("kubernetes", ["applications/reschedule"], ["update"]),
        _rule("scheduling", ["rescheduletasks"], [*_READ, "update", "delete"]),
        _rule("scheduling", ["rescheduletasks/status"], ["update"]),
        _rule("core", ["users", "groups"], ["impersonate"]),  # a task acts for its requester
        _LEASES,
        _EVENTS,
    ],
    "infrastructure-controller": [
        # it writes the kubeconfig of the clusters it builds, and their finalizer
        _rule("kubernetes", ["clusters"], [*_READ, "secrets", "update"]),
        _rule("kubernetes", ["clusters/status"], ["update"]),
        _rule("infrastructure", ["clouds", "globalclouds"], [*_READ, "secrets"]),
        _rule(
            "infrastructure",
            ["infrastructureproviders", "globalinfrastructureproviders"],
            [*_READ, "secrets"],
        ),
        _LEASES,
        _EVENTS,
    ],
    "agent": [
        _rule("kubernetes", ["clusters"], [*_READ, "secrets"]),
        _rule("kubernetes", ["clusters/status"], ["update"]),  # registers its URL there
        _rule("scheduling", ["*"], [*_READ, "update"]),
        _LEASES,
        _EVENTS,
    ],
}


def component_user(component: str) -> str:
    return f"system:{component}"


def defaults() -> list[Role | RoleBinding]:
    """Every default role and its binding (``shoal-<name>``)."""
    objects: list[Role | RoleBinding] = []
    for name, rules in _RULES.items():
        role = f"shoal-{name}"
        subject = f"group:{ADMINS}" if name == "admin" else component_user(name)
        objects.append(Role(metadata=Metadata(name=role), rules=rules))
        objects.append(RoleBinding(metadata=Metadata(name=role), users=[subject], roles=[role]))
    return objects


async def ensure_defaults(store: Store) -> int:
    """Create the default roles and bindings that are missing; how many were created."""
    created = 0
    for obj in defaults():
        now = utcnow()
        obj.metadata.created = obj.metadata.modified = now
        obj.metadata.uid = str(uuid.uuid4())
        try:
            await store.create(obj.store_key(), encode(obj))
            created += 1
        except AlreadyExists:
            continue
    return created
