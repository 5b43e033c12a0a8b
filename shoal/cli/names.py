"""Kinds by the names people type: plural, kind name, short name, ``group/plural``.

Works on ``shoal.model.catalog`` (no model classes), so ``shoal get`` can
find its kind without importing pydantic; a miss suggests the closest names.
"""

from __future__ import annotations

from shoal.cli.errors import CliError, did_you_mean
from shoal.model.catalog import CATALOG, Entry

DEFAULT_NAMESPACE = "default"


def all_names() -> list[str]:
    return sorted({name for entry in CATALOG for name in entry.names})


def resolve(text: str) -> Entry:
    """The kind of a plural, kind name or short name (case-insensitive), or ``group/plural``."""
    wanted = text.lower()
    for entry in CATALOG:
        if wanted in entry.short_names:
            return entry
    group, _, rest = wanted.rpartition("/")
    for entry in CATALOG:
        if group and group != entry.api:
            continue
        if rest in (entry.plural, entry.kind.lower(), entry.kind.lower() + "s"):
            return entry
    hint = did_you_mean(rest, all_names())
    if hint:
        raise CliError(f"unknown kind {text!r}{hint}")
    raise CliError(f"unknown kind {text!r}; known kinds: {', '.join(all_names())}")


def namespace_of(entry: Entry, namespace: str | None) -> str | None:
    return (namespace or DEFAULT_NAMESPACE) if entry.namespaced else None
