"""The one factory of commands: every kind's group, from the kinds table.

For each entry of ``shoal.cli.kinds.TABLE`` it builds ``shoal GROUP KIND``
with the entry's create-like verbs, ``update``, ``list``, ``get`` and
``delete``; the options of a verb come from the entry's flags. The generic
verbs (``shoal get app``, ``shoal.cli.generic``) share the option builders
(``shoal.cli.params``) and the verb bodies (``shoal.cli.verbs``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import typer

from shoal.cli.entries import Flag, KindCommands, Verb
from shoal.cli.errors import CliError
from shoal.cli.inputs import READERS, apply_labels, is_number
from shoal.cli.kinds import TABLE
from shoal.cli.output import Output
from shoal.cli.params import (
    CTX,
    Param,
    ShoalGroup,
    command,
    list_options,
    name_argument,
    namespace,
    output,
    param,
)
from shoal.cli.verbs import (
    create_object,
    delete_object,
    get_object,
    list_objects,
    new_object,
    update_object,
)
from shoal.model.base import Kind
from shoal.model.catalog import entry_of

_PAIRS = ("metric", "global_metric", "pairs")
PAIR_OPTIONS = tuple(sorted({f.long for e in TABLE for f in e.flags if f.read in _PAIRS}))
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


METRIC_READS = ("metric", "global_metric")


def _merged(base: list[Any], given: list[Any]) -> list[Any]:
    """``base`` with the metrics ``given`` added, or their weights changed (by name and scope)."""
    keys = {(m["name"], m["namespaced"]) for m in given}
    kept = [m for m in base if not isinstance(m, dict) or (
        m.get("name"), bool(m.get("namespaced"))) not in keys]  # fmt: skip
    return sorted([*kept, *given], key=_global_first)


def _at(data: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data


def apply_flags(entry: KindCommands, data: dict[str, Any], given: list[tuple[Flag, Any]]) -> None:
    """Put every given value in its field; two flags of one list join (global metrics first).
    Metrics are added to the object's list (by name) unless ``--set-metrics`` starts it empty."""
    joined: dict[str, Any] = {}
    for flag, value in sorted(given, key=lambda item: item[0].read != "set_metrics"):
        if flag.read == "labels":
            apply_labels(data.setdefault("metadata", {}), value)
            continue
        if flag.read == "set_metrics":
            value = []
        elif flag.read in METRIC_READS:
            base = joined[flag.path] if flag.path in joined else (_at(data, flag.path) or [])
            value = _merged(list(base), value)
        elif flag.path in joined:
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
    kind = entry.kind
    name = name_argument(entry_of(kind.api_name(), kind.kind_name()), entry.name_help)
    params = _verb_params(entry, verb, name)

    def body(ctx: typer.Context, name: str, namespace: str, output: Output, **values: Any) -> None:
        given = read_flags(flags, values)

        def change(data: dict[str, Any]) -> None:
            apply_flags(entry, data, given)

        update_object(ctx, entry.kind, name, namespace, change, output)

    return command(params, body)


def add_read_commands(group: typer.Typer, kind: type[Kind], what: str) -> None:
    """``list``, ``get`` and ``delete`` of one kind on a command group."""
    entry = entry_of(kind.api_name(), kind.kind_name())
    hidden = not kind.namespaced
    one = [CTX, name_argument(entry), namespace(hidden), output()]

    def list_(ctx: typer.Context, **values: Any) -> None:
        list_objects(ctx, entry, **values)

    def get(ctx: typer.Context, **values: Any) -> None:
        get_object(ctx, entry, **values)

    def delete(ctx: typer.Context, **values: Any) -> None:
        delete_object(ctx, entry, **values)

    group.command("list", help=f"List {what}.")(command([CTX, *list_options(hidden)], list_))
    group.command("get", help=f"Show one of the {what}.")(command(one, get))
    if kind.kind_name() == "Cluster":  # its applications move first; --force skips that
        force = param("force", bool, typer.Option(False, "--force", help=_FORCE))
        one = [*one[:-1], force, one[-1]]
    group.command("delete", help=f"Delete one of the {what}.")(command(one, delete))


_FORCE = "Delete at once, without moving its applications to other clusters first."


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
