"""The verbs that read or delete, for any kind: ``shoal get|list|delete KIND [NAME]``, and
the ``list``/``get``/``delete`` of every kind's group (``shoal kube app list``).

Plain click on purpose: typer builds its parameters with pydantic, which with
the models and the async client would triple the start-up of ``shoal get
clusters``. These commands import no model, client or server module (a test
holds them to that), so they answer about as quickly as kubectl.
"""

from __future__ import annotations

from typing import Any

import click

from shoal.cli import complete
from shoal.cli.names import DEFAULT_NAMESPACE, resolve
from shoal.cli.output import OUTPUT_HELP, SELECTOR_HELP, Output
from shoal.cli.verbs import delete_object, get_object, list_objects
from shoal.model.catalog import Entry

KIND_HELP = "Kind: plural, kind name or short name (app, cluster, gm, gmp, m, mp, gc, cloud...)."


def namespace_option(hidden: bool = False, help: str = "Namespace.") -> click.Option:
    return click.Option(
        ["-n", "--namespace"],
        default=DEFAULT_NAMESPACE,
        help=help,
        hidden=hidden,
        shell_complete=complete.namespaces,
    )


def output_option() -> click.Option:
    choices = click.Choice([o.value for o in Output])
    return click.Option(["-o", "--output"], type=choices, default="table", help=OUTPUT_HELP)


def _list_options(hidden: bool) -> list[click.Parameter]:
    return [
        click.Option(
            ["-A", "--all-namespaces"], is_flag=True, help="Every namespace.", hidden=hidden
        ),
        click.Option(["-l", "--selector"], help=SELECTOR_HELP),
        click.Option(["-w", "--watch"], is_flag=True, help="Print changes as they happen."),
        click.Option(["--watch-timeout"], type=float, hidden=True),
    ]


def _name(entry: Entry | None, required: bool) -> click.Argument:
    names = complete.names_of(entry) if entry else complete.names_of_kind_argument
    return click.Argument(["name"], required=required, shell_complete=names)


def _run(verb: str, entry: Entry | None) -> Any:
    def callback(
        kind: str | None = None, name: str | None = None, output: str = "table", **values: Any
    ) -> None:
        ctx = click.get_current_context()
        target = entry or resolve(str(kind))
        out = Output(output)
        if verb == "delete":
            assert name is not None
            force = bool(values.get("force"))
            delete_object(ctx, target, name, values["namespace"], out, force=force)
        elif target.kind == "Event" and name is None:
            from shoal.cli.events import list_events  # sorted, and --for KIND/NAME

            list_events(ctx, target, output=out, **values)
        elif values.pop("involved", None):
            raise click.UsageError("--for lists events: shoal get events --for KIND/NAME")
        elif name is None:
            list_objects(ctx, target, output=out, **values)
        else:
            get_object(ctx, target, name, values["namespace"], out)

    return callback


FOR_HELP = (
    "Events only (shoal get events --for app/web): those of one object, KIND/NAME "
    "(app/web, cluster/c1); of the object that has that name now, not of one deleted before."
)


def read_command(verb: str, entry: Entry | None, help: str) -> click.Command:
    """``list``, ``get`` or ``delete`` of one kind, or of any kind (``entry`` None: by KIND)."""
    hidden = entry is not None and not entry.namespaced
    params: list[click.Parameter] = []
    if entry is None:
        params.append(click.Argument(["kind"], shell_complete=complete.kinds))
    if verb != "list":
        params.append(_name(entry, required=verb == "delete" or entry is not None))
    params.append(namespace_option(hidden))
    if verb == "list" or (verb == "get" and entry is None):
        params.extend(_list_options(hidden))
    if verb == "delete" and (entry is None or entry.kind == "Cluster"):
        params.append(click.Option(
            ["--force"], is_flag=True,
            help="A cluster: remove it at once, without waiting for its applications to move.",
        ))  # fmt: skip
    if entry is None and verb != "delete":
        params.append(click.Option(["--for", "involved"], metavar="KIND/NAME", help=FOR_HELP))
    params.append(output_option())
    return click.Command(verb, callback=_run(verb, entry), params=params, help=help)


def read_commands(entry: Entry, what: str) -> list[click.Command]:
    """``list``, ``get`` and ``delete`` of one kind's group."""
    return [
        read_command("list", entry, f"List {what}."),
        read_command("get", entry, f"Show one of the {what}."),
        read_command("delete", entry, f"Delete one of the {what}."),
    ]


def _files(create: bool) -> Any:
    def callback(file: str, namespace: str, output: str, dry_run: str) -> None:
        from shoal.cli.documents import send_documents

        ctx = click.get_current_context()
        send_documents(ctx, file, namespace, Output(output), create=create, dry_run=dry_run)

    return callback


def install(root: click.Group) -> None:
    """Add ``get``, ``list``, ``delete`` and ``apply`` to the root."""
    root.add_command(read_command("get", None, "Show one object, or list the objects of a kind."))
    root.add_command(read_command("list", None, "List the objects of a kind."))
    root.add_command(read_command("delete", None, "Delete one object of any kind."))
    from shoal.cli.documents import dry_run_option

    file = click.Option(["-f", "--file"], required=True, help="YAML file of objects (- is stdin).")
    params: list[click.Parameter] = [
        file,
        namespace_option(help="Namespace of objects that name none."),
        output_option(),
        dry_run_option(),
    ]
    help = "Create or update every object of a (multi-document) YAML file."
    root.add_command(click.Command("apply", callback=_files(False), params=params, help=help))
    help = "Create every object of a (multi-document) YAML file."
    root.add_command(click.Command("create", callback=_files(True), params=params, help=help))


def _completion(shell: str) -> None:
    from click.shell_completion import get_completion_class

    ctx = click.get_current_context()
    completion = get_completion_class(shell)
    assert completion is not None
    root = ctx.find_root().command
    click.echo(completion(root, {}, "shoal", "_SHOAL_COMPLETE").source())


def completion_command() -> click.Command:
    """``shoal completion bash|zsh|fish``: the script that completes commands, kinds and names."""
    shell = click.Argument(["shell"], type=click.Choice(["bash", "zsh", "fish"]))
    help = (
        "Print the shell completion script: commands, kinds, namespaces and names "
        '(bash: eval "$(shoal completion bash)").'
    )
    return click.Command("completion", callback=_completion, params=[shell], help=help)
