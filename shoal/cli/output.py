"""How objects are printed: tables with the catalog's columns, JSON, YAML, watch events.

Tables are plain text in kubectl's layout (columns three spaces apart, a bold
header on a terminal); printing them needs neither rich nor the models, so
``shoal get`` starts fast. Objects are the API's JSON as dicts.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import click

from shoal.model.catalog import Column, Entry, entry_of

if TYPE_CHECKING:
    from shoal.model.base import Kind


class Output(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"

    @property
    def tabular(self) -> bool:
        return self in (Output.table, Output.wide)


OUTPUT_HELP = "Output format: table, wide (more columns, full times), json or yaml."
SELECTOR_HELP = "Label selector: k=v,k!=v,k in (a,b)."




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


def _object(obj: dict[str, Any], involved: Any) -> str | None:
    """An event's object as ``kind/name`` (``namespace/kind/name`` from another namespace)."""
    if not isinstance(involved, dict):
        return None
    name = f"{str(involved.get('kind', '')).lower()}/{involved.get('name')}"
    ns = involved.get("namespace")
    return f"{ns}/{name}" if ns and ns != dig(obj, "metadata.namespace") else name


def _score(obj: dict[str, Any], score: Any) -> str | None:
    return None if not isinstance(score, int | float) else f"{score:.4f}"


def _cordoned(obj: dict[str, Any], state: Any) -> Any:
    """A cluster's state, as kubectl shows a cordoned node's (``Ready,SchedulingDisabled``)."""
    return f"{state},SchedulingDisabled" if dig(obj, "spec.unschedulable") else state


def _nodes(obj: dict[str, Any], summary: Any) -> str | None:
    total = next((n for n in summary or [] if isinstance(n, dict) and n.get("summary")), None)
    return None if total is None else f"{total.get('ready')}/{total.get('count')}"


def _mode(obj: dict[str, Any], mode: Any) -> str:
    """A cluster's mode: ``push`` when the document leaves it out (its default)."""
    return str(mode or "push")


def describe_shares(counts: list[Any]) -> str:
    """``3 clusters (4/3/3)``: how many clusters run an application, and each one's share."""
    numbers = "/".join("all" if count is None else str(count) for count in counts)
    return f"{len(counts)} {'cluster' if len(counts) == 1 else 'clusters'} ({numbers})"


def _placements(obj: dict[str, Any], placements: Any) -> str | None:
    """``3 clusters (4/3/3)``: an application's clusters and each one's share."""
    if not placements:
        return None
    return describe_shares([p.get("replicas") for p in placements if isinstance(p, dict)])


def degraded(conditions: Any) -> str | None:
    """The message of an application's ``Degraded`` condition (a placement that runs short)."""
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == "Degraded":
            if condition.get("status", "True") == "True":
                return str(condition.get("message") or "")
    return None


def _degraded(obj: dict[str, Any], conditions: Any) -> str | None:
    """``Degraded: on 1 of 2 clusters asked for: ...``, for ``-o wide``."""
    message = degraded(conditions)
    return None if message is None else f"Degraded: {message}"


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
    "score": _score,
    "cordoned": _cordoned,
    "nodes": _nodes,
    "mode": _mode,
    "placements": _placements,
    "degraded": _degraded,
    "object": _object,
}


def cell(column: Column, obj: dict[str, Any], wide: bool = False) -> str:
    """One cell; with ``wide``, times are printed in full rather than as ages."""
    value = dig(obj, column.path)
    if wide and column.format == "age":
        return show(value)
    return show(FORMATS[column.format](obj, value))


# tables ------------------------------------------------------------------------


def dump(obj: Kind) -> dict[str, Any]:
    return obj.model_dump(mode="json")


def _line(cells: list[str], widths: list[int]) -> str:
    return "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _print_table(headers: list[str] | None, rows: list[list[str]], widths: list[int]) -> None:
    """Rows in columns three spaces apart, no trailing spaces; the header bold on a terminal."""
    lines = []
    if headers is not None:
        header = _line(headers, widths)
        lines.append(click.style(header, bold=True) if sys.stdout.isatty() else header)
    lines.extend(_line(row, widths) for row in rows)
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def table_lines(headers: list[str], rows: list[list[str]], indent: int = 0) -> list[str]:
    """The lines of a table as ``_print_table`` lays it out, indented (for describe pages)."""
    widths = _widths(headers, rows)
    return [" " * indent + _line(cells, widths) for cells in [headers, *rows]]


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    return [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]


def print_data(data: Any, output: Output) -> None:
    if output is Output.json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))


def print_documents(documents: list[Any], output: Output) -> None:
    """JSON or YAML documents one after the other (YAML ones separated by ``---``)."""
    for index, item in enumerate(documents):
        if output is Output.yaml and index:
            click.echo("---")
        print_data(item, output)


def print_items(entry: Entry, items: list[dict[str, Any]], output: Output) -> None:
    """Objects (the API's JSON) as a table, one row each, or one by one as JSON or YAML."""
    if not output.tabular:
        print_documents(items, output)
        return
    columns = entry.table(output is Output.wide)
    headers = [c.header for c in columns]
    rows = [[cell(c, item, output is Output.wide) for c in columns] for item in items]
    _print_table(headers, rows, _widths(headers, rows))


def print_objects(kind: type[Kind], objects: list[Kind], output: Output) -> None:
    """Model objects, printed as ``print_items`` prints their JSON."""
    print_items(entry_of(kind.api_name(), kind.kind_name()), [dump(o) for o in objects], output)


def print_list(entry: Entry, items: list[dict[str, Any]], revision: int, output: Output) -> None:
    """A list: a table, or the API's list document as JSON or YAML."""
    if output.tabular:
        if not items:
            click.echo(f"No {entry.plural} found.", err=True)
            return
        print_items(entry, items, output)
        return
    document = {
        "api": entry.api,
        "kind": f"{entry.kind}List",
        "metadata": {"resource_version": revision},
        "items": items,
    }
    print_data(document, output)


class WatchPrinter:
    """Rows (or JSON lines, or YAML documents) of watch events as they arrive."""

    def __init__(self, entry: Entry, output: Output) -> None:
        self.output = output
        self.columns = entry.table(output is Output.wide)
        self.headers = ["EVENT", *(c.header for c in self.columns)]
        self.widths: list[int] = []
        self.count = 0

    def _row(self, event_type: str, data: dict[str, Any]) -> list[str]:
        wide = self.output is Output.wide
        return [event_type, *(cell(c, data, wide) for c in self.columns)]

    def start(self, items: list[dict[str, Any]]) -> None:
        if self.output.tabular:
            rows = [self._row("ADDED", o) for o in items]
            self.widths = _widths(self.headers, rows)
            self.widths[0] = max(self.widths[0], len("MODIFIED"))
            _print_table(self.headers, rows, self.widths)
        else:
            for obj in items:
                self.event("ADDED", obj)

    def event(self, event_type: str, data: dict[str, Any]) -> None:
        if self.output.tabular:
            rows = [self._row(event_type, data)]
            new = _widths(self.headers, rows)
            self.widths = [max(w, n) for w, n in zip(self.widths, new, strict=True)]
            _print_table(None, rows, self.widths)
        elif self.output is Output.json:
            line = json.dumps({"type": event_type, "object": data}, ensure_ascii=False)
            click.echo(line)
        else:
            if self.count:
                click.echo("---")
            print_data({"type": event_type, "object": data}, self.output)
        self.count += 1
        sys.stdout.flush()
