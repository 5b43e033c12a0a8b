"""What a request acts on, read from its method and path alone (no route table).

Every resource route has Krake's shape, so the path names the API group,
namespace, resource, name and subresource of any kind, including kinds added
later (fleet pods): nothing is left uncovered by forgetting a route.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shoal.model import registry

# Paths anyone may read, and paths any authenticated user may read (no tenant data).
PUBLIC = frozenset({"/healthz", "/readyz", "/ui", "/cluster-info"})  # the CA is no secret
PUBLIC_PREFIX = "/ui/"  # the dashboard's static files; each API call it makes needs a token
ANY_USER = frozenset({"/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch route: each item is one object's write in its own namespace, authorised
    on its own (``verb`` on ``api``/``resource`` in the namespace at ``namespace``)."""

    field: str  # the body's list of items
    api: str
    resource: str
    verb: str = "update"
    namespace: tuple[str, ...] = ("namespace",)  # where an item names its namespace


_CREATED = ("metadata", "namespace")  # a created object names its namespace in its metadata

BATCHES = {
    "/scheduling/bindings": Batch("bindings", "kubernetes", "applications/binding"),
    "/scheduling/reschedules": Batch("items", "kubernetes", "applications/reschedule"),
    "/scheduling/podstatuses": Batch("items", "scheduling", "pods/status"),
    "/scheduling/applicationstatuses": Batch("items", "kubernetes", "applications/status"),
    "/scheduling/applicationfinalizers": Batch("items", "kubernetes", "applications"),
    # creates in batches (shoal.api.creates), on the collection of every namespace
    **{
        path: Batch("items", kind.api_name(), kind.plural, "create", _CREATED)
        for path, kind in registry.BATCH_CREATES.items()
    },
}

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
_NOT = ("false", "0", "no")


@dataclass(frozen=True, slots=True)
class Target:
    api: str
    resource: str  # plural, or plural/subresource
    verb: str
    namespace: str | None
    name: str | None
    every: bool  # list-all or watch-all of a namespaced kind: answered per namespace

    @property
    def plural(self) -> str:
        return self.resource.partition("/")[0]


def _watching(params: Mapping[str, str]) -> bool:
    value = params.get("watch")
    return value is not None and value.lower() not in _NOT


def target(method: str, path: str, params: Mapping[str, str]) -> Target:
    """What ``method`` on ``path`` acts on; ``params``: the query, decoded as the route
    decodes it (``?%77atch=1`` is a watch)."""
    parts = path.strip("/").split("/")
    if len(parts) >= 4 and parts[1] == "namespaces":
        api, namespace, rest = parts[0], parts[2], parts[3:]
    else:
        api, namespace, rest = parts[0], None, parts[1:]
    plural = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    resource = f"{plural}/{'/'.join(rest[2:])}" if len(rest) > 2 else plural
    kind = registry.BY_PLURAL.get((api, plural))
    every = namespace is None and name is None and kind is not None and kind.namespaced
    if method in ("GET", "HEAD"):
        if name is not None:
            verb = "get"
        elif _watching(params):
            verb = "watch"
        else:
            verb = "list_all" if every else "list"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return Target(api, resource, verb, namespace, name, every)
