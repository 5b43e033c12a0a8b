"""``shoal get events [--for KIND/NAME] [-w]``: what happened, newest last.

The API labels every event with its object's kind, name and uid
(``involved.shoal/kind``, ``involved.shoal/name``, ``involved.shoal/uid``), so
``--for`` is a label selector the API applies, to lists and watches alike, and
is cheap however many events are kept. It names the object that has that name
now, by its uid: an object deleted and created again under the same name does
not inherit the old one's history. When no object has the name (deleted), the
events of every object that had it are shown. Without ``-w`` the events are sorted by their last
occurrence, as ``kubectl get events --sort-by=.lastTimestamp`` does.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from shoal.cli.config import Ctx, http
from shoal.cli.errors import CliError
from shoal.cli.http import Problem
from shoal.cli.names import namespace_of, resolve
from shoal.cli.output import Output, print_list
from shoal.cli.verbs import list_objects
from shoal.model.catalog import Entry

KIND_LABEL = "involved.shoal/kind"  # as shoal.api.events sets them (no import: start-up)
NAME_LABEL = "involved.shoal/name"
UID_LABEL = "involved.shoal/uid"


def selector_for(ctx: Ctx, involved: str, namespace: str | None) -> str:
    """``KIND/NAME`` (any name of a kind: ``app/web``, ``cluster/c1``) as a label selector:
    the events of the object of that name in ``namespace`` (None: every namespace)."""
    kind, slash, name = involved.partition("/")
    if not slash or not kind or not name:
        raise CliError(f"--for {involved!r}: expected KIND/NAME, such as app/web or cluster/c1")
    entry = resolve(kind)
    selector = f"{KIND_LABEL}={entry.kind},{NAME_LABEL}={name}"
    uid = current_uid(ctx, entry, name, namespace)
    return f"{selector},{UID_LABEL}={uid}" if uid else selector


def current_uid(ctx: Ctx, entry: Entry, name: str, namespace: str | None) -> str | None:
    """The uid of the object named ``name`` now; None when there is none, or it is not
    one object (every namespace) or not readable: then the name alone selects."""
    if entry.namespaced and namespace is None:
        return None
    try:
        found = http(ctx).request("GET", entry.item_path(quote(name, safe=""), namespace))
    except Problem:
        return None
    uid = (found.get("metadata") or {}).get("uid") if isinstance(found, dict) else None
    return uid if isinstance(uid, str) and uid else None


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
    ns = None if options.get("all_namespaces") else namespace_of(entry, namespace)
    about = selector_for(ctx, involved, ns) if involved else None
    joined = ",".join(s for s in (selector, about) if s) or None
    if options.get("watch"):
        list_objects(ctx, entry, namespace, selector=joined, **options)
        return
    items, revision = http(ctx).list(entry.collection_path(ns), {"label_selector": joined})
    items.sort(key=_last)
    print_list(entry, items, revision, options.get("output", Output.table))


def _last(item: dict[str, Any]) -> str:
    return str(item.get("last_timestamp") or "")
