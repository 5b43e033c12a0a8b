"""What every ``shoal`` command shares: where the API is, output, errors, async calls.

Commands build plain JSON-shaped dicts, validate them with the model (so a bad
flag is reported with the field it ends up in), and talk to the API through
the one ``ShoalClient``. Every failure leaves as one red line on stderr and an
exit code — 1 for errors the API or the input caused, 2 when the API cannot be
reached — never as a traceback.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from shoal.client.rest import (
    DEFAULT_URL,
    ApiError,
    Gone,
    ShoalClient,
    Unreachable,
)
from shoal.model import registry
from shoal.model.base import Kind
from shoal.model.core import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metric,
    MetricsProvider,
    Role,
    RoleBinding,
)
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import Application, Cluster

T = TypeVar("T")

ENV_API = "SHOAL_API"
ENV_CONFIG = "SHOAL_CONFIG"
DEFAULT_CONFIG = "~/.config/shoal/config.yaml"
DEFAULT_NAMESPACE = "default"


# errors ------------------------------------------------------------------------


class CliError(Exception):
    """A failure to report as one message; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    Console(stderr=True, highlight=False, soft_wrap=True).print(Text(message, style="red"))
    raise typer.Exit(code)


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    parts = [p for p in parts if not p.startswith(("function-", "union[", "json-or-python"))]
    return ".".join(parts) or "body"


def describe_validation(error: ValidationError, what: str = "") -> str:
    """Name each failing field the way the API does (``spec.min: ...``)."""
    reasons = []
    for item in error.errors(include_url=False, include_input=False):
        msg = str(item.get("msg", "invalid"))
        msg = msg.removeprefix("Value error, ")
        reasons.append(f"{_field(item.get('loc', ()))}: {msg}")
    prefix = f"INVALID_RESOURCE: {what}: " if what else "INVALID_RESOURCE: "
    return prefix + "; ".join(reasons[:10])


@contextmanager
def errors_handled(url: str | None = None) -> Iterator[None]:
    """Turn the errors a command can meet into a red message and an exit code."""
    try:
        yield
    except ApiError as error:
        fail(f"{error.title or error.status}: {error.detail}")
    except Unreachable as error:
        where = url or str(error).split(": ")[0]
        fail(
            f"cannot reach the Shoal API at {where} "
            f"(set it with --api, ${ENV_API} or 'api:' in {config_path()})",
            code=2,
        )
    except ValidationError as error:
        fail(describe_validation(error))
    except CliError as error:
        fail(error.message, error.code)


class ShoalGroup(TyperGroup):
    """Group class of the root app: every command's errors become messages."""

    def invoke(self, ctx: Any) -> Any:
        with errors_handled():
            return super().invoke(ctx)


PAIR_OPTIONS = ("--metric", "--global-metric")
LIST_OPTIONS = ("--allowed-values",)


def _is_number(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return not math.isnan(value)


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
            if "=" not in name and not name.startswith("-") and _is_number(value):
                out.append(f"{name}={value}")
                i += 2
        elif arg in LIST_OPTIONS and i < len(args):
            out.append(args[i])
            i += 1
            while i < len(args) and _is_number(args[i]):
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


# configuration -----------------------------------------------------------------


def config_path() -> Path:
    return Path(os.environ.get(ENV_CONFIG) or DEFAULT_CONFIG).expanduser()


def load_config() -> dict[str, Any]:
    """The config file's settings; {} when there is none."""
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CliError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CliError(f"config file {path} is not valid YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(f"config file {path} must hold a mapping such as 'api: http://...'")
    return data


def resolve_api(option: str | None = None) -> str:
    """``--api``, else $SHOAL_API, else the config file's ``api``, else the default."""
    if option:
        return option
    if os.environ.get(ENV_API):
        return os.environ[ENV_API]
    api = load_config().get("api")
    if api is not None and not isinstance(api, str):
        raise CliError(f"config file {config_path()}: 'api' must be a URL string")
    return api or DEFAULT_URL


@dataclass
class CliState:
    """What the root callback stores in ``ctx.obj`` for every command."""

    api: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def api_url(ctx: typer.Context | None) -> str:
    """The API URL for this invocation (works for commands of any module)."""
    state = ctx.find_root().obj if ctx is not None else None
    return resolve_api(state.api if isinstance(state, CliState) else None)


def run(ctx: typer.Context | None, work: Callable[[ShoalClient], Awaitable[T]]) -> T:
    """Run ``work`` with a client of the configured API in a fresh event loop."""
    url = api_url(ctx)

    async def main() -> T:
        async with ShoalClient(url) as client:
            return await work(client)

    with errors_handled(url):
        return asyncio.run(main())


# input -------------------------------------------------------------------------


def read_yaml_documents(path: str) -> list[Any]:
    """Every non-empty YAML document of a file (``-`` is stdin)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise CliError(f"{path} is not valid YAML: {error}") from None


def read_mappings(path: str) -> list[dict[str, Any]]:
    docs = read_yaml_documents(path)
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise CliError(f"{path}: document {index + 1} is not a mapping")
    if not docs:
        raise CliError(f"{path} holds no YAML document")
    return docs


def parse_labels(values: Sequence[str] | None) -> dict[str, str | None]:
    """``k=v`` pairs; ``k-`` (to remove a label on update) maps to None."""
    labels: dict[str, str | None] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if sep and key:
            labels[key] = val
        elif not sep and value.endswith("-") and len(value) > 1:
            labels[value[:-1]] = None
        else:
            raise CliError(f"label {value!r} must be KEY=VALUE (or KEY- to remove it)")
    return labels


def apply_labels(metadata: dict[str, Any], labels: dict[str, str | None]) -> None:
    current = dict(metadata.get("labels") or {})
    for key, value in labels.items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    metadata["labels"] = current


def parse_pairs(values: Sequence[str] | None, what: str) -> list[tuple[str, float]]:
    """``NAME=NUMBER`` (or ``NAME NUMBER``, see expand_args) pairs."""
    pairs = []
    for value in values or ():
        name, sep, number = value.rpartition("=")
        if not sep or not name:
            raise CliError(f"{what} {value!r} must be NAME NUMBER (or NAME=NUMBER)")
        try:
            pairs.append((name, float(number)))
        except ValueError:
            raise CliError(f"{what} {name!r}: {number!r} is not a number") from None
    return pairs


def metric_refs(
    global_metrics: Sequence[str] | None, metrics: Sequence[str] | None
) -> list[dict[str, Any]] | None:
    """MetricRefs from ``--global-metric`` and ``--metric``; None when neither was given."""
    if not global_metrics and not metrics:
        return None
    refs = [
        {"name": name, "weight": weight, "namespaced": False}
        for name, weight in parse_pairs(global_metrics, "--global-metric")
    ]
    refs += [
        {"name": name, "weight": weight, "namespaced": True}
        for name, weight in parse_pairs(metrics, "--metric")
    ]
    return refs


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


# kinds -------------------------------------------------------------------------

SHORT_NAMES: dict[str, type[Kind]] = {
    "app": Application,
    "apps": Application,
    "cluster": Cluster,
    "gm": GlobalMetric,
    "gmp": GlobalMetricsProvider,
    "m": Metric,
    "mp": MetricsProvider,
    "role": Role,
    "rolebinding": RoleBinding,
    "rb": RoleBinding,
    "gc": GlobalCloud,
    "cloud": Cloud,
}


def kind_names(kind: type[Kind]) -> list[str]:
    short = [name for name, k in SHORT_NAMES.items() if k is kind]
    return [kind.plural, kind.kind_name().lower(), *short]


def resolve_kind(text: str) -> type[Kind]:
    """A kind from its plural, kind name or short name (case-insensitive)."""
    wanted = text.lower()
    if wanted in SHORT_NAMES:
        return SHORT_NAMES[wanted]
    group, _, rest = wanted.rpartition("/")
    for kind in registry.KINDS:
        if group and group != kind.api_name():
            continue
        if rest in (kind.plural, kind.kind_name().lower(), kind.kind_name().lower() + "s"):
            return kind
    known = ", ".join(sorted({n for k in registry.KINDS for n in kind_names(k)}))
    raise CliError(f"unknown kind {text!r}; known kinds: {known}")


def namespace_of(kind: type[Kind], namespace: str | None) -> str | None:
    return (namespace or DEFAULT_NAMESPACE) if kind.namespaced else None


# output ------------------------------------------------------------------------


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


Getter = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Column:
    """One table column: a header and a dotted path or function of the object."""

    header: str
    value: str | Getter

    def get(self, obj: dict[str, Any]) -> str:
        if callable(self.value):
            return show(self.value(obj))
        return show(dig(obj, self.value))


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


def age(obj: dict[str, Any]) -> str:
    created = dig(obj, "metadata.created")
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


def ref(path: str) -> Getter:
    """A ResourceRef column: ``name``, or ``namespace/name`` from another namespace."""

    def get(obj: dict[str, Any]) -> str | None:
        target = dig(obj, path)
        if not isinstance(target, dict):
            return None
        ns = target.get("namespace")
        if ns and ns != dig(obj, "metadata.namespace"):
            return f"{ns}/{target.get('name')}"
        return str(target.get("name"))

    return get


def reason(obj: dict[str, Any]) -> str | None:
    code = dig(obj, "status.reason.code")
    return str(code) if code else None


def metric_list(path: str) -> Getter:
    def get(obj: dict[str, Any]) -> str:
        refs = dig(obj, path) or []
        return ",".join(
            f"{r.get('name')}:{show(r.get('weight'))}" for r in refs if isinstance(r, dict)
        )

    return get


def provider_url(obj: dict[str, Any]) -> Any:
    spec = obj.get("spec") or {}
    section = spec.get(str(spec.get("type"))) or {}
    return section.get("url")


def rules(obj: dict[str, Any]) -> str:
    def one(rule: dict[str, Any]) -> str:
        parts = [
            rule.get("api") or "*",
            ",".join(rule.get("resources") or ["*"]),
            ",".join(rule.get("namespaces") or ["*"]),
            ",".join(rule.get("verbs") or ["*"]),
        ]
        return ":".join(parts)

    return " ".join(one(r) for r in obj.get("rules") or [])


NAME = Column("NAME", "metadata.name")
NAMESPACE = Column("NAMESPACE", "metadata.namespace")
AGE = Column("AGE", age)
LABELS = Column("LABELS", "metadata.labels")
METRIC_COLUMNS = [
    NAME,
    Column("MIN", "spec.min"),
    Column("MAX", "spec.max"),
    Column("PROVIDER", "spec.provider.name"),
    Column("METRIC", "spec.provider.metric"),
    Column("ALLOWED", "spec.allowed_values"),
    AGE,
]
PROVIDER_COLUMNS = [NAME, Column("TYPE", "spec.type"), Column("URL", provider_url), AGE]
CLOUD_COLUMNS = [
    NAME,
    Column("TYPE", "spec.type"),
    Column("URL", lambda o: dig(o, f"spec.{dig(o, 'spec.type')}.url")),
    Column("STATE", "status.state"),
    LABELS,
    Column("METRICS", metric_list("spec.openstack.metrics")),
    AGE,
]

COLUMNS: dict[str, list[Column]] = {
    "Application": [
        NAMESPACE,
        NAME,
        Column("STATE", "status.state"),
        Column("SCHEDULED_TO", ref("status.scheduled_to")),
        Column("RUNNING_ON", ref("status.running_on")),
        Column("REASON", reason),
        AGE,
    ],
    "Cluster": [
        NAME,
        Column("STATE", "status.state"),
        LABELS,
        Column("METRICS", metric_list("spec.metrics")),
        Column("SCHEDULED_TO", ref("status.scheduled_to")),
        AGE,
    ],
    "GlobalMetric": METRIC_COLUMNS,
    "Metric": METRIC_COLUMNS,
    "GlobalMetricsProvider": PROVIDER_COLUMNS,
    "MetricsProvider": PROVIDER_COLUMNS,
    "Role": [NAME, Column("RULES", rules), AGE],
    "RoleBinding": [NAME, Column("USERS", "users"), Column("ROLES", "roles"), AGE],
    "GlobalCloud": CLOUD_COLUMNS,
    "Cloud": CLOUD_COLUMNS,
}


def register_columns(kind: type[Kind] | str, columns: list[Column]) -> None:
    """Table columns for a kind added by another module."""
    COLUMNS[kind if isinstance(kind, str) else kind.kind_name()] = columns


def columns_of(kind: type[Kind]) -> list[Column]:
    default = [NAMESPACE, NAME, AGE] if kind.namespaced else [NAME, AGE]
    return COLUMNS.get(kind.kind_name(), default)


def dump(obj: Kind) -> dict[str, Any]:
    return obj.model_dump(mode="json")


def _console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = 1000  # pipes and tests: never wrap rows
    return console


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


def _print_table(table: Table) -> None:
    """Print a table without the padding rich leaves after the last column."""
    console = _console()
    with console.capture() as captured:
        console.print(table)
    lines = [_TRAILING.sub(r"\1", line) for line in captured.get().splitlines()]
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def _table(columns: list[Column], rows: list[list[str]], widths: list[int], header: bool) -> Table:
    table = Table(
        box=None,
        show_header=header,
        header_style="bold",
        pad_edge=False,
        padding=(0, 3, 0, 0),
        show_edge=False,
    )
    for column, width in zip(columns, widths, strict=True):
        table.add_column(column.header, min_width=width, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def _widths(columns: list[Column], rows: list[list[str]]) -> list[int]:
    return [max([len(c.header), *(len(row[i]) for row in rows)]) for i, c in enumerate(columns)]


def print_data(data: Any, output: Output) -> None:
    if output is Output.json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))


def print_objects(kind: type[Kind], objects: list[Kind], output: Output) -> None:
    """Objects as a table (one row each) or, one by one, as JSON or YAML documents."""
    data = [dump(o) for o in objects]
    if output is Output.table:
        columns = columns_of(kind)
        rows = [[c.get(d) for c in columns] for d in data]
        _print_table(_table(columns, rows, _widths(columns, rows), True))
        return
    for index, item in enumerate(data):
        if output is Output.yaml and index:
            typer.echo("---")
        print_data(item, output)


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
        self.kind = kind
        self.output = output
        self.columns = [Column("EVENT", "type"), *columns_of(kind)]
        self.widths: list[int] = []
        self.count = 0

    def _row(self, event_type: str, obj: Kind) -> list[str]:
        data = dump(obj)
        return [event_type, *(c.get(data) for c in self.columns[1:])]

    def start(self, items: list[Kind]) -> None:
        if self.output is Output.table:
            rows = [self._row("ADDED", o) for o in items]
            self.widths = _widths(self.columns, rows)
            self.widths[0] = max(self.widths[0], len("MODIFIED"))
            _print_table(_table(self.columns, rows, self.widths, True))
        else:
            for obj in items:
                self.event("ADDED", obj)

    def event(self, event_type: str, obj: Kind) -> None:
        if self.output is Output.table:
            rows = [self._row(event_type, obj)]
            self.widths = [
                max(w, n) for w, n in zip(self.widths, _widths(self.columns, rows), strict=True)
            ]
            _print_table(_table(self.columns, rows, self.widths, False))
        elif self.output is Output.json:
            line = json.dumps({"type": event_type, "object": dump(obj)}, ensure_ascii=False)
            typer.echo(line)
        else:
            if self.count:
                typer.echo("---")
            print_data({"type": event_type, "object": dump(obj)}, self.output)
        self.count += 1
        sys.stdout.flush()


# shared command bodies -----------------------------------------------------------


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


def apply_documents(ctx: typer.Context, path: str, namespace: str | None, output: Output) -> None:
    """Create or update every object of a (multi-document) YAML file."""
    objects: list[Kind] = []
    for doc in read_mappings(path):
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
        objects.append(build(kind, doc))

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
    if output is Output.table:
        for obj, verb in results:
            ns = f"{obj.metadata.namespace}/" if obj.metadata.namespace else ""
            typer.echo(f"{obj.kind} {ns}{obj.metadata.name} {verb}")
    else:
        for index, (obj, _) in enumerate(results):
            if output is Output.yaml and index:
                typer.echo("---")
            print_data(dump(obj), output)


# options -----------------------------------------------------------------------

OUTPUT_HELP = "Output format: table, json or yaml."


def output_option() -> Any:
    return typer.Option(Output.table, "-o", "--output", help=OUTPUT_HELP)


def namespace_option() -> Any:
    return typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace.")


def add_read_commands(group: typer.Typer, kind: type[Kind], what: str) -> None:
    """``list``, ``get`` and ``delete`` of one kind on a command group."""
    namespaced = kind.namespaced

    @group.command("list", help=f"List {what}.")
    def list_(
        ctx: typer.Context,
        namespace: str = typer.Option(
            DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace.", hidden=not namespaced
        ),
        all_namespaces: bool = typer.Option(
            False, "-A", "--all-namespaces", help="Every namespace.", hidden=not namespaced
        ),
        selector: str | None = typer.Option(
            None, "-l", "--selector", help="Label selector: k=v,k!=v,k in (a,b)."
        ),
        output: Output = output_option(),
        watch: bool = typer.Option(False, "-w", "--watch", help="Print changes as they happen."),
        watch_timeout: float | None = typer.Option(None, "--watch-timeout", hidden=True),
    ) -> None:
        list_objects(
            ctx,
            kind,
            namespace,
            all_namespaces=all_namespaces,
            selector=selector,
            output=output,
            watch=watch,
            watch_timeout=watch_timeout,
        )

    @group.command("get", help=f"Show one of the {what}.")
    def get(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Name."),
        namespace: str = typer.Option(
            DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace.", hidden=not namespaced
        ),
        output: Output = output_option(),
    ) -> None:
        get_object(ctx, kind, name, namespace, output)

    @group.command("delete", help=f"Delete one of the {what}.")
    def delete(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Name."),
        namespace: str = typer.Option(
            DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace.", hidden=not namespaced
        ),
        output: Output = output_option(),
    ) -> None:
        delete_object(ctx, kind, name, namespace, output)


__all__ = [
    "COLUMNS",
    "CliError",
    "CliState",
    "Column",
    "KrakeGroup",
    "Output",
    "ShoalGroup",
    "api_url",
    "fail",
    "new_group",
    "register_columns",
    "resolve_api",
    "run",
]
