"""A Cluster's kubeconfig, checked the way the Kubernetes client loads it.

``current-context`` (or the only context) must resolve to a context whose
cluster and user exist; the server must be an ``http(s)`` URL and the user
must carry a credential. Exec and auth-provider entries are kept as given and
never run here. Krake wanted exactly one context, user and cluster: Shoal
only warns, since ``current-context`` picks one of many.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any
from urllib.parse import urlsplit

from shoal.model.validation.findings import Finding, join, type_name
from shoal.model.validation.names import identifier

_SECTIONS = ("contexts", "clusters", "users")
_ENTRY = {"contexts": "context", "clusters": "cluster", "users": "user"}


def check_kubeconfig(config: Any, path: str) -> Iterator[Finding]:
    if not isinstance(config, dict):
        yield Finding(path, f"must be a kubeconfig (an object), not {type_name(config)}")
        return
    entries: dict[str, dict[str, tuple[int, Any]]] = {}
    broken = False
    for section in _SECTIONS:
        found = list(_named_entries(config, section, join(path, section)))
        broken |= any(isinstance(f, Finding) for f in found)
        yield from (f for f in found if isinstance(f, Finding))
        entries[section] = {n: (i, e) for i, n, e in (f for f in found if isinstance(f, tuple))}
    if broken:
        return
    chosen = yield from _current_context(config, entries["contexts"], path)
    if chosen is None:
        return
    index, context = chosen
    where = join(path, "contexts", index, "context")
    if not isinstance(context, dict):
        yield Finding(where, f"must be an object with cluster and user, not {type_name(context)}")
        return
    for part, section in (("cluster", "clusters"), ("user", "users")):
        name = context.get(part)
        if not isinstance(name, str) or not name:
            yield Finding(join(where, part), f"must name an entry of {section}")
        elif name not in entries[section]:
            known = ", ".join(repr(n) for n in entries[section]) or "none"
            yield Finding(join(where, part), f"names {name!r}, which is not in {section} ({known})")
        elif section == "clusters":
            yield from _server(entries[section][name], join(path, section))
        else:
            yield from _credential(entries[section][name], join(path, section))
    for section in _SECTIONS:
        if len(entries[section]) > 1:
            yield Finding(
                join(path, section),
                f"has {len(entries[section])} entries; Shoal uses the current context's only",
                warning=True,
            )


def _named_entries(config: dict[str, Any], section: str, path: str) -> Iterator[Any]:
    """(index, name, entry) of each entry of a section, or Findings for the broken ones."""
    value = config.get(section)
    if not isinstance(value, list) or not value:
        yield Finding(path, f"must list at least one {_ENTRY[section]}")
        return
    seen: set[str] = set()
    for index, entry in enumerate(value):
        where = join(path, index)
        if not isinstance(entry, dict):
            yield Finding(where, f"must be an object with name and {_ENTRY[section]}")
            continue
        problems = list(identifier(entry.get("name"), join(where, "name")))
        if problems:
            yield from problems
            continue
        name = entry["name"]
        if name in seen:
            yield Finding(join(where, "name"), f"{name!r} is listed twice")
            continue
        seen.add(name)
        yield index, name, entry.get(_ENTRY[section])


def _current_context(
    config: dict[str, Any], contexts: dict[str, tuple[int, Any]], path: str
) -> Generator[Finding, None, tuple[int, Any] | None]:
    """Which context the client would use: a generator returning (index, context) or None."""
    current = config.get("current-context")
    if current in (None, ""):
        if len(contexts) == 1:
            return next(iter(contexts.values()))
        yield Finding(
            join(path, "current-context"),
            f"must name one of the {len(contexts)} contexts ({', '.join(contexts)})",
        )
        return None
    if not isinstance(current, str) or current not in contexts:
        known = ", ".join(repr(n) for n in contexts)
        yield Finding(
            join(path, "current-context"), f"names {current!r}, which is not a context ({known})"
        )
        return None
    return contexts[current]


def _server(entry: tuple[int, Any], path: str) -> Iterator[Finding]:
    where, cluster = _inner(entry, path, "cluster")
    if not isinstance(cluster, dict):
        yield Finding(where, f"must be an object with server, not {type_name(cluster)}")
        return
    server = cluster.get("server")
    if not isinstance(server, str) or not _is_url(server):
        yield Finding(join(where, "server"), f"must be an http:// or https:// URL, not {server!r}")


def _inner(entry: tuple[int, Any], path: str, part: str) -> tuple[str, Any]:
    """The path and value of an entry's inner object (``clusters[0].cluster``)."""
    index, inner = entry
    return join(path, index, part), inner


def _is_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and text.isprintable()


_CREDENTIALS = (
    ("token",),
    ("tokenFile",),
    ("client-certificate-data", "client-key-data"),
    ("client-certificate", "client-key"),
    ("username", "password"),
    ("exec",),
    ("auth-provider",),
)


def _credential(entry: tuple[int, Any], path: str) -> Iterator[Finding]:
    where, user = _inner(entry, path, "user")
    if not isinstance(user, dict):
        yield Finding(where, f"must be an object with a credential, not {type_name(user)}")
        return
    if not any(all(user.get(field) for field in fields) for fields in _CREDENTIALS):
        yield Finding(
            where,
            "has no credential: give token, client-certificate-data and client-key-data, "
            "username and password, exec or auth-provider",
        )
        return
    run = user.get("exec")
    if run is not None and (not isinstance(run, dict) or not run.get("command")):
        yield Finding(join(where, "exec"), "must be an object with a command")
    provider = user.get("auth-provider")
    if provider is not None and (not isinstance(provider, dict) or not provider.get("name")):
        yield Finding(join(where, "auth-provider"), "must be an object with a name")
