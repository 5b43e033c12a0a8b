"""How objects are printed: tables with the registry's columns, JSON, YAML, watch events."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from shoal.model.base import Kind
from shoal.model.registry import Column, resource_of


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


OUTPUT_HELP = "Output format: table, json or yaml."


def output_option() -> Any:
    return typer.Option(Output.table, "-o", "--output", help=OUTPUT_HELP)


# cells -------------------------------------------------------------------------


def dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def show(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(show(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={show(v)}" for k, v in value.items())
    return str(value)


def _age(obj: dict[str, Any], created: Any) -> str:
    if not created:
        return "-"
    try:
        then = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return "-"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int((datetime.now(UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _ref(obj: dict[str, Any], target: Any) -> str | None:
    """``name``, or ``namespace/name`` when the target is in another namespace."""
    if not isinstance(target, dict):
        return None
    ns = target.get("namespace")
    if ns and ns != dig(obj, "metadata.namespace"):
        return f"{ns}/{target.get('name')}"
    return str(target.get("name"))


def _weights(obj: dict[str, Any], refs: Any) -> str:
    return ",".join(
        f"{r.get('name')}:{show(r.get('weight'))}" for r in refs or [] if isinstance(r, dict)
    )


def _section_url(obj: dict[str, Any], spec: Any) -> Any:
    spec = spec or {}
    return (spec.get(str(spec.get("type"))) or {}).get("url")


def _rules(obj: dict[str, Any], rules: Any) -> str:
    def one(rule: dict[str, Any]) -> str:
        parts = [
            rule.get("api") or "*",
            ",".join(rule.get("resources") or ["*"]),
            ",".join(rule.get("namespaces") or ["*"]),
            ",".join(rule.get("verbs") or ["*"]),
        ]
        return ":".join(parts)

    return " ".join(one(r) for r in rules or [])


def _fetch(obj: dict[str, Any], status: Any) -> str | None:
    """``OK``, or the reason code with the consecutive failed fetches; None before a fetch."""
    status = status or {}
    if not status.get("last_fetch"):
        return None
    code = (status.get("reason") or {}).get("code")
    return f"{code}({status.get('errors', 0)})" if code else "OK"


def _ms(obj: dict[str, Any], seconds: Any) -> str | None:
    return None if seconds is None else f"{seconds * 1000:.0f}ms"


def _failures(obj: dict[str, Any], targets: Any) -> str:
    reasons = Counter(t.get("reason") for t in targets or [] if t.get("result") == "Failed")
    return ",".join(f"{reason}={n}" for reason, n in sorted(reasons.items()))


FORMATS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "": lambda obj, value: value,
    "age": _age,
    "ref": _ref,
    "weights": _weights,
    "section_url": _section_url,
    "rules": _rules,
    "fetch": _fetch,
    "ms": _ms,
    "failures": _failures,
}


def cell(column: Column, obj: dict[str, Any]) -> str:
    return show(FORMATS[column.format](obj, dig(obj, column.path)))


# tables ------------------------------------------------------------------------


def dump(obj: Kind) -> dict[str, Any]:
    return obj.model_dump(mode="json")


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


def _print_table(table: Table) -> None:
    """Print a table without the padding rich leaves after the last column."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = 1000  # pipes and tests: never wrap rows
    with console.capture() as captured:
        console.print(table)
    lines = [_TRAILING.sub(r"\1", line) for line in captured.get().splitlines()]
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def _table(headers: list[str], rows: list[list[str]], widths: list[int], header: bool) -> Table:
    table = Table(
        box=None,
        show_header=header,
        header_style="bold",
        pad_edge=False,
        padding=(0, 3, 0, 0),
        show_edge=False,
    )
    for title, width in zip(headers, widths, strict=True):
        table.add_column(title, min_width=width, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    return table


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    return [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]


def print_data(data: Any, output: Output) -> None:
    if output is Output.json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))


def print_documents(documents: list[Any], output: Output) -> None:
    """JSON or YAML documents one after the other (YAML ones separated by ``---``)."""
    for index, item in enumerate(documents):
        if output is Output.yaml and index:
            typer.echo("---")
        print_data(item, output)


def print_objects(kind: type[Kind], objects: list[Kind], output: Output) -> None:
    """Objects as a table (one row each) or, one by one, as JSON or YAML documents."""
    data = [dump(o) for o in objects]
    if output is not Output.table:
        print_documents(data, output)
        return
    columns = resource_of(kind).columns
    headers = [c.header for c in columns]
    rows = [[cell(c, d) for c in columns] for d in data]
    _print_table(_table(headers, rows, _widths(headers, rows), True))


def print_list(kind: type[Kind], items: list[Kind], revision: int, output: Output) -> None:
    """A list: a table, or the API's list document as JSON or YAML."""
    if output is Output.table:
        if not items:
            Console(stderr=True, highlight=False).print(f"No {kind.plural} found.")
            return
        print_objects(kind, items, output)
        return
    document = {
        "api": kind.api_name(),
        "kind": f"{kind.kind_name()}List",
        "metadata": {"resource_version": revision},
        "items": [dump(o) for o in items],
    }
    print_data(document, output)


class WatchPrinter:
    """Rows (or JSON lines, or YAML documents) of watch events as they arrive."""

    def __init__(self, kind: type[Kind], output: Output) -> None:
        self.output = output
        self.columns = resource_of(kind).columns
        self.headers = ["EVENT", *(c.header for c in self.columns)]
        self.widths: list[int] = []
        self.count = 0

    def _row(self, event_type: str, obj: Kind) -> list[str]:
        data = dump(obj)
        return [event_type, *(cell(c, data) for c in self.columns)]

    def start(self, items: list[Kind]) -> None:
        if self.output is Output.table:
            rows = [self._row("ADDED", o) for o in items]
            self.widths = _widths(self.headers, rows)
            self.widths[0] = max(self.widths[0], len("MODIFIED"))
            _print_table(_table(self.headers, rows, self.widths, True))
        else:
            for obj in items:
                self.event("ADDED", obj)

    def event(self, event_type: str, obj: Kind) -> None:
        if self.output is Output.table:
            rows = [self._row(event_type, obj)]
            new = _widths(self.headers, rows)
            self.widths = [max(w, n) for w, n in zip(self.widths, new, strict=True)]
            _print_table(_table(self.headers, rows, self.widths, False))
        elif self.output is Output.json:
            line = json.dumps({"type": event_type, "object": dump(obj)}, ensure_ascii=False)
            typer.echo(line)
        else:
            if self.count:
                typer.echo("---")
            print_data({"type": event_type, "object": dump(obj)}, self.output)
        self.count += 1
        sys.stdout.flush()
