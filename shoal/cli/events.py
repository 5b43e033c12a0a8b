"""``shoal get events [--for KIND/NAME] [-w]``: what happened, newest last.

The recorder labels every event with its object's kind and name
(``involved.shoal/kind``, ``involved.shoal/name``), so ``--for`` is a label
selector the API applies, to lists and watches alike, and is cheap however
many events are kept. Without ``-w`` the events are sorted by their last
occurrence, as ``kubectl get events --sort-by=.lastTimestamp`` does.
"""

from __future__ import annotations

from typing import Any

from shoal.cli.config import Ctx, http
from shoal.cli.errors import CliError
from shoal.cli.names import namespace_of, resolve
from shoal.cli.output import Output, print_list
from shoal.cli.verbs import list_objects
from shoal.model.catalog import Entry

KIND_LABEL = "involved.shoal/kind"  # as shoal.events.recorder sets them (no import: start-up)
NAME_LABEL = "involved.shoal/name"


def selector_for(involved: str) -> str:
    """``KIND/NAME`` (any name of a kind: ``app/web``, ``cluster/c1``) as a label selector."""
    kind, slash, name = involved.partition("/")
    if not slash or not kind or not name:
        raise CliError(f"--for {involved!r}: expected KIND/NAME, such as app/web or cluster/c1")
    return f"{KIND_LABEL}={resolve(kind).kind},{NAME_LABEL}={name}"


def list_events(
    ctx: Ctx,
    entry: Entry,
    namespace: str | None,
    *,
    involved: str | None = None,
    selector: str | None = None,
    **options: Any,
) -> None:
    """``options`` are those of ``list_objects`` (output, all_namespaces, watch...)."""
    selectors = [s for s in (selector, selector_for(involved) if involved else None) if s]
    joined = ",".join(selectors) or None
    if options.get("watch"):
        list_objects(ctx, entry, namespace, selector=joined, **options)
        return
    ns = None if options.get("all_namespaces") else namespace_of(entry, namespace)
    items, revision = http(ctx).list(entry.collection_path(ns), {"label_selector": joined})
    items.sort(key=_last)
    print_list(entry, items, revision, options.get("output", Output.table))


def _last(item: dict[str, Any]) -> str:
    return str(item.get("last_timestamp") or "")
