"""Building commands from parameter lists: the options every verb shares, with their completion.

Commands are plain functions given an ``inspect.Signature`` that typer reads,
so one list of parameters serves every kind's creating and changing verbs
(``shoal.cli.commands``), ``explain`` and ``reschedule``. The verbs that read
are plain click (``shoal.cli.generic``), for start-up time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from shoal.cli import complete
from shoal.cli.handling import FriendlyGroup
from shoal.cli.names import DEFAULT_NAMESPACE
from shoal.cli.output import OUTPUT_HELP, SELECTOR_HELP, Output
from shoal.model.catalog import Entry

Param = inspect.Parameter


class ShoalGroup(FriendlyGroup, TyperGroup):
    """Group class of the typer groups: errors become messages, unknown commands a suggestion."""


def param(name: str, annotation: Any, default: Any) -> Param:
    return Param(name, Param.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


CTX = Param("ctx", Param.POSITIONAL_OR_KEYWORD, annotation=typer.Context)


def output_option() -> Any:
    return typer.Option(Output.table, "-o", "--output", help=OUTPUT_HELP)


def output() -> Param:
    return param("output", Output, output_option())


def namespace_option(hidden: bool = False, help: str = "Namespace.") -> Any:
    """``-n/--namespace``, completed with the namespaces that hold clusters or applications."""
    return typer.Option(
        DEFAULT_NAMESPACE,
        "-n",
        "--namespace",
        help=help,
        hidden=hidden,
        autocompletion=lambda ctx, incomplete: complete.namespaces(ctx, None, incomplete),
    )


def namespace(hidden: bool = False, help: str = "Namespace.") -> Param:
    return param("namespace", str, namespace_option(hidden, help))


def names_argument(entry: Entry, help: str = "Name.") -> Any:
    """A NAME argument (or NAMES...) of one kind, completed with the names of that kind."""
    names = complete.names_of(entry)
    return typer.Argument(
        ..., help=help, autocompletion=lambda ctx, incomplete: names(ctx, None, incomplete)
    )


def name_argument(entry: Entry, help: str = "Name.") -> Param:
    """The NAME argument of a verb of one kind, completed with the names of that kind."""
    return param("name", str, names_argument(entry, help))


def list_options(hidden: bool) -> list[Param]:
    """``-n``, ``-A``, ``-l``, ``-o``, ``-w`` of every kind's ``list`` (as the generic one's)."""
    return [
        namespace(hidden),
        param(
            "all_namespaces",
            bool,
            typer.Option(False, "-A", "--all-namespaces", help="Every namespace.", hidden=hidden),
        ),
        param("selector", str | None, typer.Option(None, "-l", "--selector", help=SELECTOR_HELP)),
        output(),
        param(
            "watch",
            bool,
            typer.Option(False, "-w", "--watch", help="Print changes as they happen."),
        ),
        param("watch_timeout", float | None, typer.Option(None, "--watch-timeout", hidden=True)),
    ]


def command(params: list[Param], body: Callable[..., None]) -> Callable[..., None]:
    """A function typer reads ``params`` from, that hands the values to ``body``."""

    def run(**values: Any) -> None:
        body(**values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return run
