"""``shoal create -f`` and ``shoal apply -f``: every object of a (multi-document) YAML file.

Every object is checked locally first. As kubectl does, the good ones are
sent and every refused one is reported, in file order, with its file and
document, and each wrong field on its own line with the line of the file it
is on (``m.yaml:12: spec.manifest[0].spec.template: expected object``); the
command then exits 1. An unknown kind gets the nearest known ones suggested.
``apply`` leaves an object whose spec, labels and other fields already are as
written alone, and says ``unchanged``. Consecutive applications (or fleet pods)
are created in one request (``POST /kubernetes/applications``), in file order;
``apply`` then compares and updates those that already existed, one by one.
``--dry-run=server`` sends each object with ``?dry_run=true``: the API runs
every check and stores nothing; ``--dry-run=client`` only checks what Shoal can
check locally.
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


def _unknown_kind(path: str, api: str, kind_name: str) -> str:
    """The error of an unknown api/kind, with the nearest known kinds as suggestions."""
    import difflib

    from shoal.model import registry

    known = {k.kind_name().lower(): f"{k.api_name()}/{k.kind_name()}" for k in registry.KINDS}
    names = difflib.get_close_matches(kind_name.lower(), list(known), n=3, cutoff=0.75)
    near = [known[n] for n in names]
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return f"{path}: unknown kind {api}/{kind_name}{hint}"


def _document(path: str, index: int, doc: dict[str, Any], namespace: str | None) -> Kind:
    from pydantic import ValidationError

    from shoal.model import registry

    api, kind_name = doc.get("api"), doc.get("kind")
    what = f"{path}, document {index + 1}"
    if not isinstance(api, str) or not isinstance(kind_name, str):
        raise CliError(f"{what}: every document needs 'api' and 'kind'")
    try:
        kind = registry.kind_for(api, kind_name)
    except KeyError:
        raise CliError(_unknown_kind(what, api, kind_name)) from None
    metadata = doc.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise CliError(f"{what}: metadata of {kind_name} must be a mapping")
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
    """Create (``create``) or create-or-update every object of the file, in order; every
    refused one reported in file order, then exit 1."""
    from shoal.client.rest import ApiError

    docs = read_mappings(path)
    objects: list[Kind | None] = []
    errors: dict[int, str] = {}
    for i, doc in enumerate(docs):
        try:
            objects.append(_document(path, i, doc, namespace))
        except CliError as error:
            objects.append(None)
            errors[i] = str(error)
    server = dry_run == "server"

    async def work(client: ShoalClient) -> dict[int, tuple[Kind, str]]:
        done: dict[int, tuple[Kind, str]] = {}

        def refused(index: int, error: ApiError) -> None:
            what = _what(path, index, docs[index])
            where = place_in_file(path, index)
            errors[index] = problem_message(error.status, error.problem, what, where)

        for batch in _runs(objects):
            answers: list[Kind | ApiError] = []
            if len(batch) > 1:  # one request for a run of applications (or pods)
                try:
                    answers = await client.create_many([o for _, o in batch], dry_run=server)
                except ApiError as error:
                    if error.status not in (403, 404, 405):
                        raise
                    # An API from before creates in batches (405; its guard answers 403 to
                    # a create across namespaces): one request each, below.
                for (index, _), answer in zip(batch, answers, strict=False):
                    if isinstance(answer, ApiError):
                        if not create and answer.title == "RESOURCE_ALREADY_EXISTS":
                            continue  # apply: compared and updated below, as alone
                        refused(index, answer)
                    else:
                        done[index] = answer, "created"
            for index, obj in batch:
                if index in done or index in errors:
                    continue
                try:
                    done[index] = await _send(client, obj, create, server)
                except ApiError as error:
                    refused(index, error)
        return done

    if dry_run == "client":
        results = {i: (obj, "checked") for i, obj in enumerate(objects) if obj is not None}
    elif any(obj is not None for obj in objects):
        results = run(ctx, work)
    else:
        results = {}
    if not output.tabular:
        print_documents([dump(obj) for _, (obj, _) in sorted(results.items())], output)
    else:
        suffix = f" ({dry_run} dry run)" if dry_run != "none" else ""
        for _, (obj, verb) in sorted(results.items()):
            ns = f"{obj.metadata.namespace}/" if obj.metadata.namespace else ""
            click.echo(f"{obj.kind} {ns}{obj.metadata.name} {verb}{suffix}")
    if errors:
        refused = len(errors)
        lines = [errors[i] for i in sorted(errors)]
        lines.append(f"{refused} of {len(docs)} object(s) refused")
        raise CliError("\n".join(lines))


def _runs(objects: list[Kind | None]) -> list[list[tuple[int, Kind]]]:
    """The objects in file order, as runs: consecutive objects of one kind created in
    batches share a run (one request), every other object is a run of its own."""
    runs: list[list[tuple[int, Kind]]] = []
    for index, obj in enumerate(objects):
        if obj is None:
            continue
        last = runs[-1][-1][1] if runs else None
        if last is not None and type(last) is type(obj) and type(obj).created_in_batches:
            runs[-1].append((index, obj))
        else:
            runs.append([(index, obj)])
    return runs


def _as_written(obj: Kind) -> dict[str, Any]:
    """What ``apply`` compares: every field but the status and the server's metadata."""
    data = obj.model_dump(mode="json", exclude={"status"})
    meta = data.pop("metadata")
    data["metadata"] = {k: meta.get(k) for k in ("labels", "inherit_labels", "owners")}
    return data


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
    if _as_written(current) == _as_written(obj):
        return current, "unchanged"
    obj.metadata.resource_version = current.metadata.resource_version
    return await client.update(obj, dry_run=dry_run), "configured"
