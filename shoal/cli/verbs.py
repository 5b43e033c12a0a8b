"""The bodies of the verbs every kind has: list (and watch), get, create, update, delete.

Reading and deleting work on the API's JSON with the light client
(``shoal.cli.http``): no model is imported, so they start fast. Creating and
changing build plain JSON-shaped dicts, validate them with the model (so a bad
flag is reported with the field it ends up in) and send them with the one
``ShoalClient``; those imports happen inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from shoal.cli.config import Ctx, http, run
from shoal.cli.errors import CliError, describe_validation, did_you_mean
from shoal.cli.http import Problem
from shoal.cli.inputs import apply_labels
from shoal.cli.names import DEFAULT_NAMESPACE, namespace_of
from shoal.cli.output import (
    Output,
    WatchPrinter,
    dump,
    print_items,
    print_list,
    print_objects,
)
from shoal.model.catalog import Entry, entry_of

if TYPE_CHECKING:
    from shoal.client.rest import ShoalClient
    from shoal.model.base import Kind


def build(kind: type[Kind], data: dict[str, Any]) -> Kind:
    """Validate ``data`` as ``kind`` before it is sent, naming any bad field."""
    from pydantic import ValidationError

    try:
        return kind.model_validate(data)
    except ValidationError as error:
        name = (data.get("metadata") or {}).get("name", "?")
        raise CliError(describe_validation(error, f"{kind.kind_name()} {name!r}")) from None


def new_object(
    kind: type[Kind], name: str, namespace: str | None, labels: dict[str, str | None]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if kind.namespaced:
        metadata["namespace"] = namespace or DEFAULT_NAMESPACE
    apply_labels(metadata, labels)
    return {"api": kind.api_name(), "kind": kind.kind_name(), "metadata": metadata}


def list_objects(
    ctx: Ctx,
    entry: Entry,
    namespace: str | None,
    *,
    all_namespaces: bool = False,
    selector: str | None = None,
    output: Output = Output.table,
    watch: bool = False,
    watch_timeout: float | None = None,
) -> None:
    """A list, or with ``watch`` the list and then its changes."""
    ns = None if all_namespaces else namespace_of(entry, namespace)
    if watch:
        watch_objects(ctx, entry, ns, selector, output, watch_timeout)
        return
    items, revision = http(ctx).list(entry.collection_path(ns), {"label_selector": selector})
    print_list(entry, items, revision, output)


def watch_objects(
    ctx: Ctx,
    entry: Entry,
    ns: str | None,
    selector: str | None,
    output: Output,
    watch_timeout: float | None,
) -> None:
    """The list, then one row per change until Ctrl-C (listing again after a compaction)."""
    import asyncio

    from shoal.client.rest import Gone
    from shoal.model.registry import kind_for

    kind = kind_for(entry.api, entry.kind)

    async def work(client: ShoalClient) -> None:
        result = await client.list(kind, ns, label_selector=selector)
        printer = WatchPrinter(entry, output)
        printer.start([dump(o) for o in result.items])
        revision = result.revision
        try:
            async with asyncio.timeout(watch_timeout):
                while True:
                    try:
                        async for event in client.watch(
                            kind, ns, resource_version=revision, label_selector=selector
                        ):
                            printer.event(event.type, dump(event.object))
                            revision = max(revision, event.revision)
                        return
                    except Gone:
                        again = await client.list(kind, ns, label_selector=selector)
                        for obj in again.items:
                            printer.event("ADDED", dump(obj))
                        revision = again.revision
        except TimeoutError:
            return

    try:
        run(ctx, work)
    except KeyboardInterrupt:
        return


def _named(
    ctx: Ctx,
    entry: Entry,
    method: str,
    name: str,
    ns: str | None,
    params: dict[str, Any] | None = None,
) -> Any:
    """GET or DELETE one object; a miss names the closest existing names."""
    client = http(ctx)
    try:
        return client.request(method, entry.item_path(name, ns), params)
    except Problem as error:
        if error.status != 404:
            raise
        try:
            items, _ = client.list(entry.collection_path(ns))
        except CliError:
            raise error from None
        names = [str((i.get("metadata") or {}).get("name")) for i in items]
        raise CliError(error.message + did_you_mean(name, names)) from None


def get_object(
    ctx: Ctx, entry: Entry, name: str, namespace: str | None, output: Output
) -> None:
    print_items(entry, [_named(ctx, entry, "GET", name, namespace_of(entry, namespace))], output)


def delete_object(
    ctx: Ctx, entry: Entry, name: str, namespace: str | None, output: Output, force: bool = False
) -> None:
    ns = namespace_of(entry, namespace)
    obj = _named(ctx, entry, "DELETE", name, ns, {"force": "true"} if force else None)
    if output.tabular:
        place = f"{ns}/" if ns else ""
        click.echo(f"{entry.kind} {place}{name} deleted")
    else:
        print_items(entry, [obj], output)


def create_object(
    ctx: Ctx, data: dict[str, Any], kind: type[Kind], output: Output
) -> None:
    """Create; a name in use is reported as the user named it, not as the store's key."""
    from shoal.client.rest import Conflict

    obj = build(kind, data)

    async def work(client: ShoalClient) -> Kind:
        try:
            return await client.create(obj)
        except Conflict as error:
            if error.title != "RESOURCE_ALREADY_EXISTS":
                raise
            ns = obj.metadata.namespace
            where = f" in namespace {ns!r}" if ns else ""
            message = f"{kind.kind_name()} {obj.metadata.name!r} already exists{where}"
            raise CliError(f"{error.title}: {message}") from None

    print_objects(kind, [run(ctx, work)], output)


def update_object(
    ctx: Ctx,
    kind: type[Kind],
    name: str,
    namespace: str | None,
    change: Callable[[dict[str, Any]], None],
    output: Output,
) -> None:
    """Read the object, let ``change`` edit its dict, and PUT it back (compare-and-swap)."""
    ns = namespace_of(entry_of(kind.api_name(), kind.kind_name()), namespace)

    async def work(client: ShoalClient) -> Kind:
        current = await client.get(kind, name, ns)
        data = dump(current)
        change(data)
        return await client.update(build(kind, data))

    print_objects(kind, [run(ctx, work)], output)
