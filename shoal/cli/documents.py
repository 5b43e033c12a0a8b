"""``shoal create -f`` and ``shoal apply -f``: every object of a (multi-document) YAML file.

A refused object is reported with its file and document, and each wrong
field on its own line with the line of the file it is on (``m.yaml:12:
spec.manifest[0].spec.template: expected object``). ``--dry-run=server`` sends
each object with ``?dry_run=true``: the API runs every check and stores
nothing; ``--dry-run=client`` only checks what Shoal can check locally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from shoal.cli.config import Ctx, run
from shoal.cli.errors import CliError, describe_validation, problem_message
from shoal.cli.inputs import place_in_file, read_mappings
from shoal.cli.names import DEFAULT_NAMESPACE
from shoal.cli.output import Output, dump, print_documents

if TYPE_CHECKING:
    from shoal.client.rest import ShoalClient
    from shoal.model.base import Kind

DRY_RUN = ("none", "client", "server")


def dry_run_option() -> click.Option:
    return click.Option(
        ["--dry-run"],
        type=click.Choice(DRY_RUN),
        default="none",
        show_default=True,
        help="server: the API checks every object and stores nothing; client: local checks only.",
    )


def _what(path: str, index: int, doc: dict[str, Any]) -> str:
    name = (doc.get("metadata") or {}).get("name", "?")
    return f"{doc.get('kind', '?')} {name!r} ({path}, document {index + 1})"


def _document(path: str, index: int, doc: dict[str, Any], namespace: str | None) -> Kind:
    from pydantic import ValidationError

    from shoal.model import registry

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
    try:
        return kind.model_validate(doc)
    except ValidationError as error:
        where = place_in_file(path, index)
        raise CliError(describe_validation(error, _what(path, index, doc), where)) from None


def send_documents(
    ctx: Ctx, path: str, namespace: str | None, output: Output, *, create: bool, dry_run: str
) -> None:
    """Create (``create``) or create-or-update every object of the file, in order."""
    from shoal.client.rest import ApiError

    docs = read_mappings(path)
    objects = [_document(path, i, doc, namespace) for i, doc in enumerate(docs)]
    server = dry_run == "server"

    async def work(client: ShoalClient) -> list[tuple[Kind, str]]:
        done: list[tuple[Kind, str]] = []
        for index, obj in enumerate(objects):
            try:
                done.append(await _send(client, obj, create, server))
            except ApiError as error:
                what = _what(path, index, docs[index])
                where = place_in_file(path, index)
                raise CliError(problem_message(error.status, error.problem, what, where)) from None
        return done

    if dry_run == "client":
        results = [(obj, "checked") for obj in objects]
    else:
        results = run(ctx, work)
    if not output.tabular:
        print_documents([dump(obj) for obj, _ in results], output)
        return
    suffix = f" ({dry_run} dry run)" if dry_run != "none" else ""
    for obj, verb in results:
        ns = f"{obj.metadata.namespace}/" if obj.metadata.namespace else ""
        click.echo(f"{obj.kind} {ns}{obj.metadata.name} {verb}{suffix}")


async def _send(client: ShoalClient, obj: Kind, create: bool, dry_run: bool) -> tuple[Kind, str]:
    from shoal.client.rest import ApiError

    kind = type(obj)
    if create:
        return await client.create(obj, dry_run=dry_run), "created"
    try:
        current = await client.get(kind, obj.metadata.name, obj.metadata.namespace)
    except ApiError as error:
        if error.status != 404:
            raise
        return await client.create(obj, dry_run=dry_run), "created"
    obj.metadata.resource_version = current.metadata.resource_version
    return await client.update(obj, dry_run=dry_run), "configured"
