"""What one entry of the table of kinds' commands holds (``shoal.cli.kinds``): its verbs, and
the flags that fill its fields; the rows more than one kind shares.

Apart from the table so that each group's rows (``core_kinds``, ``kinds``) can be written
in a module of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.model.base import Kind

CREATE = ("create",)
UPDATE = ("update",)
BOTH = ("create", "update")


@dataclass(frozen=True)
class Flag:
    """One option and the field it fills.

    ``read`` names the reader in ``shoal.cli.inputs.READERS`` (labels merge into
    ``metadata.labels``; metric references of two flags join in one list). A
    flag with a ``value`` is a switch that sets it; two switches of one field
    exclude each other. An empty ``path`` marks a flag another flag's reader uses.
    """

    decls: tuple[str, ...]
    path: str
    help: str = ""
    type: type = str
    many: bool = False
    read: str = ""
    required: bool = False
    verbs: tuple[str, ...] = BOTH
    update_help: str | None = None
    value: Any = None

    @property
    def long(self) -> str:
        """The first long form, as messages name the flag (``--inherit-metrics``)."""
        return next(d for d in self.decls if d.startswith("--")).split("/")[0]

    @property
    def name(self) -> str:
        """The option's parameter name (``--mp-name``: ``mp_name``)."""
        return self.long.removeprefix("--").replace("-", "_")

    def help_for(self, verb: str) -> str:
        return self.help if verb != "update" or self.update_help is None else self.update_help


@dataclass(frozen=True)
class Verb:
    """A command that creates (``update=False``) or changes an object from flags."""

    name: str
    help: str
    update: bool = False
    name_help: str | None = None
    default_name: Callable[[dict[str, Any]], str] | None = None


@dataclass(frozen=True)
class KindCommands:
    """Everything the CLI needs to generate the commands of one kind."""

    kind: type[Kind]
    group: str
    command: str
    what: str
    name_help: str
    verbs: tuple[Verb, ...]
    flags: tuple[Flag, ...]
    aliases: tuple[str, ...] = ()
    initial: dict[str, Any] = field(default_factory=lambda: {"spec": {}})
    finish: Callable[[KindCommands, dict[str, Any]], None] | None = None

    def flags_of(self, verb: Verb) -> tuple[Flag, ...]:
        wanted = "update" if verb.update else verb.name
        return tuple(f for f in self.flags if wanted in f.verbs)


def flag(decls: str, path: str, help: str = "", type: type = str, **options: Any) -> Flag:
    """A table row: ``decls`` space-separated (``"-l --label"``)."""
    return Flag(tuple(decls.split()), path, help, type, **options)


def created(kind: type[Kind], help: str | None = None) -> Verb:
    return Verb("create", help or f"Create a {kind.kind_name()}.")


def changed(kind: type[Kind], help: str | None = None) -> Verb:
    return Verb("update", help or f"Change a {kind.kind_name()}: only given flags change it.", True)


def label(verbs: tuple[str, ...] = BOTH) -> Flag:
    help = "Label KEY=VALUE (repeatable; on update KEY- removes it)."
    return flag("-l --label", "metadata.labels", help, many=True, read="labels", verbs=verbs)


LABEL = label()

METRIC_UPDATE_HELP = (
    "Add a namespaced metric, or change its weight: --metric NAME WEIGHT (repeatable)."
)
GLOBAL_METRIC_UPDATE_HELP = (
    "Add a global metric, or change its weight: --global-metric NAME WEIGHT (repeatable)."
)


def set_metrics(path: str) -> Flag:
    """``--set-metrics``: the metrics given with it replace the list (none given: no metrics)."""
    help = "The given --metric/--global-metric replace every metric (alone: remove them all)."
    return flag("--set-metrics", path, help, read="set_metrics", value=[], verbs=UPDATE)
