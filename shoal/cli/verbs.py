"""The bodies of the verbs every kind has: list (and watch), get, create, update, delete, apply.

Commands build plain JSON-shaped dicts, validate them with the model (so a bad
flag is reported with the field it ends up in) and talk to the API through
the one ``ShoalClient``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import typer
from pydantic import ValidationError

from shoal.cli.config import run
from shoal.cli.errors import CliError, describe_validation
from shoal.cli.inputs import apply_labels, read_mappings
from shoal.cli.kinds import DEFAULT_NAMESPACE, namespace_of
from shoal.cli.output import (
    Output,
    WatchPrinter,
    dump,
    print_documents,
    print_list,
    print_objects,
)
from shoal.client.rest import ApiError, Gone, ShoalClient
from shoal.model import registry
from shoal.model.base import Kind


def build(kind: type[Kind], data: dict[str, Any]) -> Kind:
    """Validate ``data`` as ``kind`` before it is sent, naming any bad field."""
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
    ctx: typer.Context,
    kind: type[Kind],
    namespace: str | None,
    *,
    all_namespaces: bool = False,
    selector: str | None = None,
    output: Output = Output.table,
    watch: bool = False,
    watch_timeout: float | None = None,
) -> None:
    """A list, or with ``watch`` the list and then its changes (re-listing after a compaction)."""
    ns = None if all_namespaces else namespace_of(kind, namespace)

    async def work(client: ShoalClient) -> None:
        result = await client.list(kind, ns, label_selector=selector)
        if not watch:
            print_list(kind, result.items, result.revision, output)
            return
        printer = WatchPrinter(kind, output)
        printer.start(result.items)
        revision = result.revision
        try:
            async with asyncio.timeout(watch_timeout):
                while True:
                    try:
                        async for event in client.watch(
                            kind, ns, resource_version=revision, label_selector=selector
                        ):
                            printer.event(event.type, event.object)
                            revision = max(revision, event.revision)
                        return
                    except Gone:
                        again = await client.list(kind, ns, label_selector=selector)
                        for obj in again.items:
                            printer.event("ADDED", obj)
                        revision = again.revision
        except TimeoutError:
            return

    try:
        run(ctx, work)
    except KeyboardInterrupt:
        return


def get_object(
    ctx: typer.Context, kind: type[Kind], name: str, namespace: str | None, output: Output
) -> None:
    obj = run(ctx, lambda client: client.get(kind, name, namespace_of(kind, namespace)))
    print_objects(kind, [obj], output)


def delete_object(
    ctx: typer.Context, kind: type[Kind], name: str, namespace: str | None, output: Output
) -> None:
    ns = namespace_of(kind, namespace)
    obj = run(ctx, lambda client: client.delete(kind, name, ns))
    if output is Output.table:
        where = f"{ns}/" if ns else ""
        typer.echo(f"{kind.kind_name()} {where}{name} deleted")
    else:
        print_objects(kind, [obj], output)


def create_object(
    ctx: typer.Context, data: dict[str, Any], kind: type[Kind], output: Output
) -> None:
    obj = build(kind, data)
    created = run(ctx, lambda client: client.create(obj))
    print_objects(kind, [created], output)


def update_object(
    ctx: typer.Context,
    kind: type[Kind],
    name: str,
    namespace: str | None,
    change: Callable[[dict[str, Any]], None],
    output: Output,
) -> None:
    """Read the object, let ``change`` edit its dict, and PUT it back (compare-and-swap)."""
    ns = namespace_of(kind, namespace)

    async def work(client: ShoalClient) -> Kind:
        current = await client.get(kind, name, ns)
        data = dump(current)
        change(data)
        return await client.update(build(kind, data))

    print_objects(kind, [run(ctx, work)], output)


def _document(path: str, doc: dict[str, Any], namespace: str | None) -> Kind:
    api, kind_name = doc.get("api"), doc.get("kind")
    if not isinstance(api, str) or not isinstance(kind_name, str):
        raise CliError(f"{path}: every document needs 'api' and 'kind'")
    try:
        kind = registry.kind_for(api, kind_name)
    except KeyError:
        raise CliError(f"{path}: unknown kind {api}/{kind_name}") from None
    metadata = doc.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise CliError(f"{path}: metadata of {kind_name} must be a mapping")
    if kind.namespaced:
        metadata.setdefault("namespace", namespace or DEFAULT_NAMESPACE)
    else:
        metadata.pop("namespace", None)
    return build(kind, doc)


def apply_documents(ctx: typer.Context, path: str, namespace: str | None, output: Output) -> None:
    """Create or update every object of a (multi-document) YAML file."""
    objects = [_document(path, doc, namespace) for doc in read_mappings(path)]

    async def work(client: ShoalClient) -> list[tuple[Kind, str]]:
        done: list[tuple[Kind, str]] = []
        for obj in objects:
            kind = type(obj)
            try:
                current = await client.get(kind, obj.metadata.name, obj.metadata.namespace)
            except ApiError as error:
                if error.status != 404:
                    raise
                done.append((await client.create(obj), "created"))
                continue
            obj.metadata.resource_version = current.metadata.resource_version
            done.append((await client.update(obj), "configured"))
        return done

    results = run(ctx, work)
    if output is not Output.table:
        print_documents([dump(obj) for obj, _ in results], output)
        return
    for obj, verb in results:
        ns = f"{obj.metadata.namespace}/" if obj.metadata.namespace else ""
        typer.echo(f"{obj.kind} {ns}{obj.metadata.name} {verb}")
