"""The one factory of commands: every kind's group and the generic verbs, from the kinds table.

For each entry of ``shoal.cli.kinds.TABLE`` it builds ``shoal GROUP KIND``
with the entry's create-like verbs, ``update``, ``list``, ``get`` and
``delete``; the options of a verb come from the entry's flags. ``get``,
``list``, ``delete`` and ``apply`` of any kind (``shoal get app``) share the
same option builders and verb bodies.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import typer

from shoal.cli.errors import CliError, ShoalGroup
from shoal.cli.inputs import READERS, apply_labels, is_number
from shoal.cli.kinds import DEFAULT_NAMESPACE, GROUPS, TABLE, Flag, KindCommands, Verb, resolve_kind
from shoal.cli.output import Output, output_option
from shoal.cli.verbs import (
    apply_documents,
    create_object,
    delete_object,
    get_object,
    list_objects,
    new_object,
    update_object,
)
from shoal.model.base import Kind

PAIR_OPTIONS = tuple(
    sorted({f.long for e in TABLE for f in e.flags if f.read in ("metric", "global_metric")})
)
LIST_OPTIONS = tuple(sorted({f.long for e in TABLE for f in e.flags if f.read == "numbers"}))


def expand_args(args: list[str]) -> list[str]:
    """Accept Krake's ``--metric NAME WEIGHT`` and ``--allowed-values 1 2 3``.

    Click options take one value, so the pairs become ``NAME=WEIGHT`` and the
    lists become one option per value before the command parses them.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        out.append(arg)
        i += 1
        if arg in PAIR_OPTIONS and i + 1 < len(args):
            name, value = args[i], args[i + 1]
            if "=" not in name and not name.startswith("-") and is_number(value):
                out.append(f"{name}={value}")
                i += 2
        elif arg in LIST_OPTIONS and i < len(args):
            out.append(args[i])
            i += 1
            while i < len(args) and is_number(args[i]):
                out.extend([arg, args[i]])
                i += 1
    return out


class KrakeGroup(ShoalGroup):
    """Group class of kube/core/infra: Krake-style multi-value options."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return list(super().parse_args(ctx, expand_args(list(args))))


def new_group(help: str) -> typer.Typer:
    """A command group in the house style (Krake-style options, help on no args)."""
    return typer.Typer(cls=KrakeGroup, help=help, no_args_is_help=True)


# parameters --------------------------------------------------------------------

Param = inspect.Parameter


def param(name: str, annotation: Any, default: Any) -> Param:
    return Param(name, Param.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


CTX = Param("ctx", Param.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
KIND_HELP = "Kind: plural, kind name or short name (app, cluster, gm, gmp, m, mp, gc, cloud...)."


def output() -> Param:
    return param("output", Output, output_option())


def namespace(hidden: bool = False, help: str = "Namespace.") -> Param:
    option = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help=help, hidden=hidden)
    return param("namespace", str, option)


def list_options(hidden: bool, selector_help: str) -> list[Param]:
    """``-n``, ``-A``, ``-l``, ``-o``, ``-w`` of every list."""
    return [
        namespace(hidden),
        param(
            "all_namespaces",
            bool,
            typer.Option(False, "-A", "--all-namespaces", help="Every namespace.", hidden=hidden),
        ),
        param("selector", str | None, typer.Option(None, "-l", "--selector", help=selector_help)),
        output(),
        param(
            "watch",
            bool,
            typer.Option(False, "-w", "--watch", help="Print changes as they happen."),
        ),
        param("watch_timeout", float | None, typer.Option(None, "--watch-timeout", hidden=True)),
    ]


def flag_param(flag: Flag, verb: Verb) -> Param:
    """The option of ``flag`` on ``verb``: required only where it creates."""
    help = flag.help_for("update" if verb.update else verb.name)
    annotation: Any = flag.type | None
    default: Any = None
    if flag.value is not None:
        annotation, default = bool, False
    elif flag.many:
        annotation = list[flag.type] | None  # type: ignore[name-defined]
    elif flag.required and not verb.update:
        annotation, default = flag.type, ...
    return param(flag.name, annotation, typer.Option(default, *flag.decls, help=help))


def command(params: list[Param], body: Callable[..., None]) -> Callable[..., None]:
    """A function typer reads ``params`` from, that hands the values to ``body``."""

    def run(**values: Any) -> None:
        body(**values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return run


# flags to fields ---------------------------------------------------------------


def read_flags(flags: tuple[Flag, ...], values: dict[str, Any]) -> list[tuple[Flag, Any]]:
    """The given flags with the value each puts in its field; files are read here, up front."""
    given: list[tuple[Flag, Any]] = []
    switched: dict[str, Flag] = {}
    for flag in flags:
        raw = values.get(flag.name)
        if flag.value is not None:
            if not raw:
                continue
            if flag.path in switched:
                raise CliError(f"{switched[flag.path].long} and {flag.long} exclude each other")
            switched[flag.path] = flag
            given.append((flag, flag.value))
        elif raw is not None and raw != [] and flag.path:
            given.append((flag, READERS[flag.read](raw, flag.long, values)))
    return given


def _global_first(item: Any) -> bool:
    return bool(item.get("namespaced")) if isinstance(item, dict) else False


def apply_flags(entry: KindCommands, data: dict[str, Any], given: list[tuple[Flag, Any]]) -> None:
    """Put every given value in its field; two flags of one list join (global metrics first)."""
    joined: dict[str, Any] = {}
    for flag, value in given:
        if flag.read == "labels":
            apply_labels(data.setdefault("metadata", {}), value)
            continue
        if flag.path in joined:
            value = sorted([*joined[flag.path], *value], key=_global_first)
        joined[flag.path] = value
        *parents, last = flag.path.split(".")
        target = data
        for part in parents:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[last] = value
    if entry.finish is not None:
        entry.finish(entry, data)


# commands of one kind ------------------------------------------------------------


def _verb_params(entry: KindCommands, verb: Verb, name: Param) -> list[Param]:
    """The name, the flags with ``-n`` before the labels (where Krake has it), ``-o``."""
    flags = [flag_param(f, verb) for f in entry.flags_of(verb)]
    at = next((i for i, f in enumerate(entry.flags_of(verb)) if f.read == "labels"), len(flags))
    flags.insert(at, namespace(not entry.kind.namespaced))
    return [CTX, name, *flags, output()]


def _creating(entry: KindCommands, verb: Verb) -> Callable[..., None]:
    flags = entry.flags_of(verb)
    required = verb.default_name is None
    name = param(
        "name",
        str if required else str | None,
        typer.Argument(... if required else None, help=verb.name_help or entry.name_help),
    )
    params = _verb_params(entry, verb, name)

    def body(
        ctx: typer.Context, name: str | None, namespace: str, output: Output, **values: Any
    ) -> None:
        given = read_flags(flags, values)
        data = {**new_object(entry.kind, name or "", namespace, {}), **copy.deepcopy(entry.initial)}
        apply_flags(entry, data, given)
        if name is None and verb.default_name is not None:
            data["metadata"]["name"] = verb.default_name(data)
        create_object(ctx, data, entry.kind, output)

    return command(params, body)


def _updating(entry: KindCommands, verb: Verb) -> Callable[..., None]:
    flags = entry.flags_of(verb)
    name = param("name", str, typer.Argument(..., help=entry.name_help))
    params = _verb_params(entry, verb, name)

    def body(ctx: typer.Context, name: str, namespace: str, output: Output, **values: Any) -> None:
        given = read_flags(flags, values)

        def change(data: dict[str, Any]) -> None:
            apply_flags(entry, data, given)

        update_object(ctx, entry.kind, name, namespace, change, output)

    return command(params, body)


def add_read_commands(group: typer.Typer, kind: type[Kind], what: str) -> None:
    """``list``, ``get`` and ``delete`` of one kind on a command group."""
    hidden = not kind.namespaced
    selector = "Label selector: k=v,k!=v,k in (a,b)."
    name = param("name", str, typer.Argument(..., help="Name."))
    one = [CTX, name, namespace(hidden), output()]

    def list_(ctx: typer.Context, **values: Any) -> None:
        list_objects(ctx, kind, **values)

    def get(ctx: typer.Context, **values: Any) -> None:
        get_object(ctx, kind, **values)

    def delete(ctx: typer.Context, **values: Any) -> None:
        delete_object(ctx, kind, **values)

    group.command("list", help=f"List {what}.")(
        command([CTX, *list_options(hidden, selector)], list_)
    )
    group.command("get", help=f"Show one of the {what}.")(command(one, get))
    group.command("delete", help=f"Delete one of the {what}.")(command(one, delete))


def kind_group(entry: KindCommands) -> typer.Typer:
    """``shoal GROUP KIND``: the entry's verbs, then ``list``, ``get``, ``delete``."""
    creators = [v.name for v in entry.verbs if not v.update]
    updaters = [v.name for v in entry.verbs if v.update]
    verbs = ", ".join([*creators, "list", "get", *updaters, "delete"])
    group = new_group(f"{entry.what.capitalize()}: {verbs}.")
    for verb in entry.verbs:
        make = _updating if verb.update else _creating
        group.command(verb.name, help=verb.help)(make(entry, verb))
    add_read_commands(group, entry.kind, entry.what)
    return group


KIND_GROUPS: dict[type[Kind], typer.Typer] = {entry.kind: kind_group(entry) for entry in TABLE}
"""``shoal kube app`` and the others, by kind (kind-specific commands are added to them)."""


# the generic verbs ---------------------------------------------------------------


def _get(ctx: typer.Context, kind: str, name: str | None, **values: Any) -> None:
    if name is None:
        list_objects(ctx, resolve_kind(kind), **values)
    else:
        get_object(ctx, resolve_kind(kind), name, values["namespace"], values["output"])


def _list(ctx: typer.Context, kind: str, **values: Any) -> None:
    list_objects(ctx, resolve_kind(kind), **values)


def _delete(ctx: typer.Context, kind: str, **values: Any) -> None:
    delete_object(ctx, resolve_kind(kind), **values)


def _apply(ctx: typer.Context, file: str, namespace: str, output: Output) -> None:
    apply_documents(ctx, file, namespace, output)


def install(root: typer.Typer) -> None:
    """Add ``shoal kube|core|infra …`` and the generic ``get``, ``list``, ``delete``, ``apply``."""
    for group_name, help in GROUPS.items():
        group = new_group(help)
        for entry in TABLE:
            if entry.group == group_name:
                group.add_typer(KIND_GROUPS[entry.kind], name=entry.command)
                for alias in entry.aliases:
                    group.add_typer(KIND_GROUPS[entry.kind], name=alias, hidden=True)
        root.add_typer(group, name=group_name, help=help)

    kind = param("kind", str, typer.Argument(..., help=KIND_HELP))
    lists = list_options(False, "Label selector.")
    optional = typer.Argument(None, help="Name; without it, list them all.")
    name = param("name", str, typer.Argument(..., help="Name."))
    file = typer.Option(..., "-f", "--file", help="YAML file of objects (- is stdin).")
    ns_help = "Namespace of objects that name none."
    for verb, help, params, body in (
        (
            "get",
            "Show one object, or list the objects of a kind.",
            [CTX, kind, param("name", str | None, optional), *lists],
            _get,
        ),
        ("list", "List the objects of a kind.", [CTX, kind, *lists], _list),
        (
            "delete",
            "Delete one object of any kind.",
            [CTX, kind, name, namespace(), output()],
            _delete,
        ),
        (
            "apply",
            "Create or update every object of a (multi-document) YAML file.",
            [CTX, param("file", str, file), namespace(help=ns_help), output()],
            _apply,
        ),
    ):
        root.command(verb, help=help)(command(params, body))
