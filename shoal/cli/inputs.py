"""Reading what users give: YAML files, kubeconfigs, and the values of Krake-style flags.

Each reader turns one flag's raw value into the field it fills; the kinds
table (``shoal.cli.kinds``) names the reader of every flag.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from shoal.cli.errors import CliError, yaml_error

_TEXTS: dict[str, str] = {}
"""The text of each file read (stdin too), to find the line of a field the API refused."""


def read_yaml_documents(path: str) -> list[Any]:
    """Every non-empty YAML document of a file (``-`` is stdin)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    _TEXTS[path] = text
    import yaml

    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise yaml_error(path, error) from None


def line_of(path: str, document: int, field: str) -> int | None:
    """The line of ``field`` (``spec.manifest[0].kind``) in a document of a file read before.

    The deepest part of the path the document has: a field that is missing is
    reported at its parent's line. None when the file was not read as YAML.
    """
    text = _TEXTS.get(path)
    if text is None:
        return None
    import yaml

    try:
        nodes = [n for n in yaml.compose_all(text) if n is not None and n.tag != _NULL]
    except yaml.YAMLError:
        return None
    if not 0 <= document < len(nodes):
        return None
    node, line = nodes[document], nodes[document].start_mark.line
    for part in re.findall(r"\[\d+\]|[^.\[\]]+", field):
        if isinstance(node, yaml.SequenceNode) and part.startswith("["):
            index = int(part[1:-1])
            if index >= len(node.value):
                break
            node = node.value[index]
            line = node.start_mark.line
        elif isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if getattr(k, "value", None) == part]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line
        else:
            break
    return line + 1


_NULL = "tag:yaml.org,2002:null"


def place_in_file(path: str, document: int) -> Any:
    """``where(field)`` → ``"m.yaml:12"`` (or the file alone) for the CLI's error lines."""
    name = "<stdin>" if path == "-" else path

    def where(field: str) -> str:
        line = line_of(path, document, field)
        return f"{name}:{line}" if line is not None else name

    return where


def read_mappings(path: str) -> list[dict[str, Any]]:
    docs = read_yaml_documents(path)
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise CliError(f"{path}: document {index + 1} is not a mapping")
    if not docs:
        raise CliError(f"{path} holds no YAML document")
    return docs


def read_yaml(path: str) -> Any:
    """One YAML document of a file (a TOSCA template)."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise yaml_error(path, error) from None


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


def is_number(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return not math.isnan(value)


def parse_pairs(values: Sequence[str] | None, what: str) -> list[tuple[str, float]]:
    """``NAME=NUMBER`` (or ``NAME NUMBER``, see ``expand_args``) pairs."""
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


def parse_numbers(values: Sequence[str], what: str) -> list[float]:
    """``--allowed-values 1 2 3`` or ``--allowed-values 1,2,3``."""
    numbers = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                numbers.append(float(part))
            except ValueError:
                raise CliError(f"{what}: {part!r} is not a number") from None
    return numbers


def parse_rule(text: str) -> dict[str, Any]:
    """``api:resources:namespaces:verbs``, lists comma-separated, empty or ``*`` = any.

    Any group, resource, verb or namespace is sent as ``*``. Namespaces ``-`` are none:
    the rule opens the cluster-wide objects of its resources only (``namespaces: []``,
    which opens no namespace). A namespace may hold ':' itself (``system:admin``):
    groups, resources and verbs never do.
    """
    parts = text.split(":")
    if len(parts) > 4:
        parts = [parts[0], parts[1], ":".join(parts[2:-1]), parts[-1]]
    if len(parts) != 4:
        raise CliError(
            f"rule {text!r} must be api:resources:namespaces:verbs "
            "(lists comma-separated, empty or * for any), e.g. kubernetes:applications::get,list"
        )

    def items(part: str) -> list[str]:
        return [p for p in part.split(",") if p and p != "*"]

    def or_any(part: str) -> list[str]:
        return items(part) or ["*"]

    return {
        "api": parts[0] or "*",
        "resources": or_any(parts[1]),
        "namespaces": [] if parts[2] == "-" else or_any(parts[2]),
        "verbs": or_any(parts[3]),
    }


def load_kubeconfig(path: str, context: str | None = None) -> dict[str, Any]:
    """A kubeconfig reduced to exactly one context, user and cluster, as the API wants."""
    from shoal.machinery.kubeconfig import KubeconfigError, one_context, one_document

    try:
        return one_context(one_document(read_yaml_documents(path), path), context, path)
    except KubeconfigError as error:
        raise CliError(str(error)) from None


def _metric_refs(namespaced: bool) -> Reader:
    def read(values: Any, flag: str, given: dict[str, Any]) -> list[dict[str, Any]]:
        pairs = parse_pairs(values, flag)
        return [{"name": n, "weight": w, "namespaced": namespaced} for n, w in pairs]

    return read


def parse_weights(values: Any, flag: str) -> str | list[dict[str, Any]]:
    """``even``, ``dynamic``, or static weights ``'CONSTRAINT=WEIGHT'`` (repeatable)."""
    values = list(values) if isinstance(values, list | tuple) else [values]
    if len(values) == 1 and values[0] in ("even", "dynamic"):
        return str(values[0])
    rules = []
    for value in values:
        constraint, _, weight = str(value).rpartition("=")
        if not constraint.strip() or not weight.strip().isdigit():
            raise CliError(
                f"{flag} {value!r}: give even, dynamic, or 'CONSTRAINT=WEIGHT' (repeatable), "
                "e.g. --weights 'location is DE=2' --weights 'location is FR=1'"
            )
        rules.append({"clusters": constraint.strip(), "weight": int(weight)})
    return rules


Reader = Callable[[Any, str, dict[str, Any]], Any]
"""(raw value, flag name, every flag's raw value) → the value of the field."""

READERS: dict[str, Reader] = {
    "": lambda value, flag, given: list(value) if isinstance(value, list | tuple) else value,
    "labels": lambda value, flag, given: parse_labels(value),
    "numbers": lambda value, flag, given: parse_numbers(value, flag),
    "metric": _metric_refs(True),
    "global_metric": _metric_refs(False),
    "pairs": lambda value, flag, given: dict(parse_pairs(value, flag)),
    "rules": lambda value, flag, given: [parse_rule(rule) for rule in value],
    "manifest": lambda value, flag, given: read_mappings(value),
    "yaml": lambda value, flag, given: read_yaml(value),
    "kubeconfig": lambda value, flag, given: load_kubeconfig(value, given.get("context")),
    "global_ref": lambda value, flag, given: {"name": value, "namespaced": False},
    "weights": lambda value, flag, given: parse_weights(value, flag),
}
