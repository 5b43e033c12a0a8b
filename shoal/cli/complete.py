"""Shell completion of kinds, namespaces and object names (bash, zsh, fish, through click).

Names come from the API with a short timeout: a slow or absent API makes
completion offer nothing rather than hang the shell.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from shoal.cli.errors import CliError
from shoal.cli.names import all_names, namespace_of, resolve
from shoal.model.catalog import BY_KIND, Entry

TIMEOUT = 1.0
NAMESPACE_SOURCES = (BY_KIND[("kubernetes", "Cluster")], BY_KIND[("kubernetes", "Application")])
"""The kinds whose objects tell which namespaces are in use."""


def _metadata(ctx: click.Context, entry: Entry, namespace: str | None, key: str) -> set[str]:
    """``metadata[key]`` of every object of a kind; nothing when the API does not answer."""
    from shoal.cli.config import http

    try:
        items, _ = http(ctx, TIMEOUT).list(entry.collection_path(namespace))
    except CliError:
        return set()
    values = (item.get("metadata", {}).get(key) for item in items if isinstance(item, dict))
    return {str(value) for value in values if value}


def _matching(values: set[str], incomplete: str) -> list[str]:
    return sorted(v for v in values if v.startswith(incomplete))


def kinds(ctx: click.Context, param: click.Parameter | None, incomplete: str) -> list[str]:
    return [name for name in all_names() if name.startswith(incomplete.lower())]


def namespaces(ctx: click.Context, param: click.Parameter | None, incomplete: str) -> list[str]:
    """The namespaces that hold clusters or applications."""
    found = set().union(*(_metadata(ctx, e, None, "namespace") for e in NAMESPACE_SOURCES))
    return _matching(found, incomplete)


def _names(ctx: click.Context, entry: Entry, incomplete: str) -> list[str]:
    namespace = namespace_of(entry, ctx.params.get("namespace"))
    return _matching(_metadata(ctx, entry, namespace, "name"), incomplete)


Completion = Callable[[click.Context, click.Parameter | None, str], list[str]]


def names_of(entry: Entry) -> Completion:
    """Completion of the names of one kind (``shoal kube app get <TAB>``)."""

    def complete(ctx: click.Context, param: click.Parameter | None, incomplete: str) -> list[str]:
        return _names(ctx, entry, incomplete)

    return complete


def names_of_kind_argument(
    ctx: click.Context, param: click.Parameter | None, incomplete: str
) -> list[str]:
    """Completion of names for ``shoal get KIND <TAB>``: the kind is the first argument."""
    try:
        entry = resolve(str(ctx.params.get("kind") or ""))
    except CliError:
        return []
    return _names(ctx, entry, incomplete)
