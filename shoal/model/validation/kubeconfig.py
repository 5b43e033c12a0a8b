"""A Cluster's kubeconfig, checked the way the Kubernetes client loads it.

``current-context`` (or the only context) must resolve to a context whose
cluster and user exist; the server must be an ``http(s)`` URL and the user
must carry a credential. Krake wanted exactly one context, user and cluster:
Shoal only warns, since ``current-context`` picks one of many.

A kubeconfig is a tenant's data, so credentials that run code or read files on
Shoal's hosts (``exec``, ``auth-provider``, ``tokenFile``, and certificate or
key file paths) are refused, in every entry, unless the process's
``CredentialPolicy`` allows them: an administrator's setting
(``kubeconfig:`` in the API's configuration, ``SHOAL_KUBECONFIG_*`` in the
environment of the processes that connect to member clusters).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from shoal.machinery.paths import join
from shoal.model.validation.findings import Finding, type_name
from shoal.model.validation.names import identifier

_SECTIONS = ("contexts", "clusters", "users")
_ENTRY = {"contexts": "context", "clusters": "cluster", "users": "user"}


@dataclass(frozen=True)
class CredentialPolicy:
    """Which kubeconfig credentials that act on Shoal's hosts are allowed (none by default)."""

    exec_commands: frozenset[str] = frozenset()
    """``exec`` plugins allowed, by their ``command`` exactly as written."""
    files: bool = False
    """``tokenFile``, ``client-certificate``, ``client-key``, ``certificate-authority``."""
    auth_providers: bool = False
    """``auth-provider`` entries (they run ``gcloud`` or refresh tokens at a URL)."""

    @classmethod
    def from_environment(cls) -> CredentialPolicy:
        """``SHOAL_KUBECONFIG_ALLOW_EXEC`` (commands, comma-separated),
        ``SHOAL_KUBECONFIG_ALLOW_FILES`` and ``SHOAL_KUBECONFIG_ALLOW_AUTH_PROVIDER`` (``1``)."""
        commands = os.environ.get("SHOAL_KUBECONFIG_ALLOW_EXEC", "")
        return cls(
            frozenset(c.strip() for c in commands.split(",") if c.strip()),
            os.environ.get("SHOAL_KUBECONFIG_ALLOW_FILES", "") in ("1", "true", "yes"),
            os.environ.get("SHOAL_KUBECONFIG_ALLOW_AUTH_PROVIDER", "") in ("1", "true", "yes"),
        )

    def environment(self) -> dict[str, str]:
        """This policy as the environment variables ``from_environment`` reads."""
        env = {}
        if self.exec_commands:
            env["SHOAL_KUBECONFIG_ALLOW_EXEC"] = ",".join(sorted(self.exec_commands))
        if self.files:
            env["SHOAL_KUBECONFIG_ALLOW_FILES"] = "1"
        if self.auth_providers:
            env["SHOAL_KUBECONFIG_ALLOW_AUTH_PROVIDER"] = "1"
        return env


_policy: CredentialPolicy | None = None


def credential_policy() -> CredentialPolicy:
    """The process's policy: the one set by ``set_credential_policy``, else the environment's."""
    global _policy
    if _policy is None:
        _policy = CredentialPolicy.from_environment()
    return _policy


def set_credential_policy(policy: CredentialPolicy | None) -> None:
    """Set the process's policy (the API server, from its configuration); None: the
    environment's again."""
    global _policy
    _policy = policy


_USER_FILES = ("tokenFile", "client-certificate", "client-key")
_CLUSTER_FILES = ("certificate-authority",)
_HOW_TO_ALLOW = "an administrator allows it with kubeconfig.{key} in the API's configuration"


def check_credentials(config: Any, path: str, policy: CredentialPolicy) -> Iterator[Finding]:
    """Every entry of every user and cluster that would run a command or read a file on
    Shoal's hosts and that ``policy`` does not allow."""
    if not isinstance(config, dict):
        return
    for section, names in (("users", _USER_FILES), ("clusters", _CLUSTER_FILES)):
        entries = config.get(section)
        for index, entry in enumerate(entries if isinstance(entries, list) else ()):
            inner = entry.get(_ENTRY[section]) if isinstance(entry, dict) else None
            if not isinstance(inner, dict):
                continue
            where = join(path, section, index, _ENTRY[section])
            if not policy.files:
                for name in names:
                    if inner.get(name) not in (None, ""):
                        yield Finding(
                            join(where, name),
                            "reads a file on Shoal's hosts: give the -data form instead "
                            f"(refused unless {_HOW_TO_ALLOW.format(key='allow_files')})",
                        )
            run = inner.get("exec")
            command = run.get("command") if isinstance(run, dict) else None
            if command is not None and not isinstance(command, str):  # never run
                yield Finding(
                    join(where, "exec", "command"),
                    f"must be a string (the program; its arguments go in args), "
                    f"not {type_name(command)}",
                )
            elif command and command not in policy.exec_commands:
                yield Finding(
                    join(where, "exec"),
                    f"runs the command {command!r} on Shoal's hosts "
                    f"(refused unless {_HOW_TO_ALLOW.format(key='allow_exec')})",
                )
            if inner.get("auth-provider") is not None and not policy.auth_providers:
                yield Finding(
                    join(where, "auth-provider"),
                    "runs a command or calls a token endpoint from Shoal's hosts "
                    f"(refused unless {_HOW_TO_ALLOW.format(key='allow_auth_provider')})",
                )


def check_kubeconfig(config: Any, path: str) -> Iterator[Finding]:
    if not isinstance(config, dict):
        yield Finding(path, f"must be a kubeconfig (an object), not {type_name(config)}")
        return
    refused = list(check_credentials(config, path, credential_policy()))
    if refused:
        yield from refused
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
    elif run is not None and not isinstance(run["command"], str):
        yield Finding(
            join(where, "exec", "command"),
            f"must be a string (the program; its arguments go in args), "
            f"not {type_name(run['command'])}",
        )
    provider = user.get("auth-provider")
    if provider is not None and (not isinstance(provider, dict) or not provider.get("name")):
        yield Finding(join(where, "auth-provider"), "must be an object with a name")
