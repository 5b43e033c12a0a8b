"""TOSCA templates of clusters to be built on a cloud: checked with ``tosca-parser``.

``spec.tosca`` of a Cluster is a TOSCA Simple Profile template, inline (a
mapping), or a URL that Shoal reads only when the URL starts with one of the
prefixes in ``SHOAL_TOSCA_URLS`` (comma-separated; none by default, since an
API that fetches what users name reaches whatever it can reach). The API
checks an inline template at create and update; a URL is read by the
infrastructure controller when it builds the cluster.

A template is parsed once per request, never on the API's event loop: in a
confined worker (``shoal.machinery.confined``: no files, no network, CPU,
memory and wall-clock limits). Before that, ``imports`` and ``repositories``
are refused wherever they appear, except the imports an administrator lists
in ``SHOAL_TOSCA_IMPORTS`` (comma-separated ``NAME=PATH``: a template that
imports ``NAME`` gets the type definitions of the local file ``PATH``, which
the API reads, never the worker; ``PATH`` alone stands for ``PATH=PATH``).
A refusal names the field and says the same whatever the import names, so it
tells nothing of the API's files.

``node_shape`` is what the ``sim`` provider understands of a template
(docs/clouds.md): the compute node templates, how many of each, how big.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import yaml

from shoal.machinery.confined import (
    CallFailed,
    WorkerDied,
    WorkerError,
    Workers,
    WorkersBusy,
    WorkerTimeout,
)
from shoal.machinery.paths import join
from shoal.model.tosca_nodes import SIZE

URLS_SETTING = "SHOAL_TOSCA_URLS"
IMPORTS_SETTING = "SHOAL_TOSCA_IMPORTS"
MAX_NODE_TEMPLATES = 500
"""Templates that big take 1-4 s to parse on a loaded 2-core machine; node counts are
``default_instances``, not node templates."""
MAX_TYPES = 500
MAX_DEPTH = 64
PARSE_SECONDS = 10.0
"""Wall-clock time a parse may take, waits for a core included; a template no worker took
within that time is a 503 to try again. A user's templates are parsed one after the other
(``confined.CALLER``): one user holds one worker at most."""
PARSE_CPU_SECONDS = 5
PARSE_MEMORY = 1 << 30
_REFUSED_KEYS = ("imports", "repositories")
_TYPE_SECTIONS = ("node_types", "data_types", "capability_types", "relationship_types",
                  "interface_types", "artifact_types", "policy_types", "group_types")  # fmt: skip

Problem = tuple[str, str]
"""Where, under ``spec.tosca`` (``""``: the template), and why."""


def allowed_url(url: str) -> bool:
    """Whether configuration allows reading a template from ``url``.

    A prefix is matched as the URL is read, not as text: the same scheme, host and port
    (a prefix without a host, ``https://``, allows any), then the path under the prefix's.
    Text would let ``https://templates.example.org.evil.net/`` or
    ``https://templates.example.org@127.0.0.1/`` through ``https://templates.example.org``.
    A URL with a login (``user@``) or a ``.``/``..`` segment is never allowed."""
    prefixes = [p.strip() for p in os.environ.get(URLS_SETTING, "").split(",") if p.strip()]
    try:
        target = _origin_and_path(url)
    except ValueError:
        return False
    if target is None:
        return False
    for prefix in prefixes:
        try:
            allowed = _origin_and_path(prefix)
        except ValueError:
            continue
        if allowed is None:
            continue
        (scheme, host, port), path = allowed
        if (scheme, port if host else None) != (target[0][0], target[0][2] if host else None):
            continue
        if host and host != target[0][1]:
            continue
        if target[1].startswith(path):
            return True
    return False


def _origin_and_path(url: str) -> tuple[tuple[str, str, int | None], str] | None:
    """((scheme, host, port), path) of ``url``; None for a URL that is never allowed."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None or "\\" in parts.netloc:
        return None
    segments = unquote(parts.path).split("/")
    if any(segment in (".", "..") for segment in segments):
        return None
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    host = (parts.hostname or "").rstrip(".")
    return (scheme, host, port), parts.path


async def problems(template: dict[str, Any] | str, base: str = "spec.tosca") -> list[Problem]:
    """Why ``template`` is not a TOSCA template Shoal can build from; empty when it is.

    Each problem names its field under ``base``. Parses at most once, in a worker.
    """
    if isinstance(template, str):
        if not re.match(r"^https?://", template) or not template.endswith((".yaml", ".yml")):
            return [(base, "must be a TOSCA template (a mapping) or an http(s) URL of one, "
                     "ending in .yaml or .yml")]  # fmt: skip
        if not allowed_url(template):
            return [(base, f"reading templates from URLs is not allowed here (set "
                     f"{URLS_SETTING})")]  # fmt: skip
        return []
    if not template:
        return []
    found = [(join(base, where) if where else base, why) for where, why in refusals(template)]
    if found:
        return found
    try:
        parsed = await parse(template)
    except OSError:  # an administrator's file of allowed types
        return [(join(base, "imports"), "an allowed import could not be read here (ask an "
                 "administrator)")]  # fmt: skip
    except WorkerError as error:
        return [worker_problem(error, base)]
    return [(join(base, where) if where else base, why) for where, why in parsed["problems"]]


def worker_problem(error: WorkerError, base: str) -> Problem:
    """The user's problem when a worker gave no result for their template under ``base``;
    ``ProblemError`` 503 when it is not theirs (busy workers, workers that cannot start)."""
    if isinstance(error, WorkerTimeout):
        return (base, f"takes longer to parse than a template may ({PARSE_CPU_SECONDS} s of "
                f"CPU, {PARSE_SECONDS:g} s in all): a type derived from itself, or too much "
                "to read")  # fmt: skip
    if isinstance(error, WorkerDied):
        return (base, "needs more memory to parse than a template may use: refused")
    if isinstance(error, CallFailed):  # the parse stopped on something no rule foresaw
        return (base, "is not a valid TOSCA template (the parser could not read it)")
    from shoal.machinery.problems import ProblemError  # not in the worker: it stays light

    if isinstance(error, WorkersBusy):  # others' templates held every worker: try again
        reason = (f"no TOSCA worker was free for it within {PARSE_SECONDS:g} s (your "
                  "other templates go first, one at a time): try again shortly")  # fmt: skip
        raise ProblemError(503, f"{base}: {reason}", "BUSY",
                           [{"field": base, "reason": reason}]) from None  # fmt: skip
    # the workers cannot start: this server's fault, not the user's
    raise ProblemError(503, f"TOSCA templates cannot be parsed here now ({error})") from None


async def parse(template: dict[str, Any]) -> dict[str, Any]:
    """``parse_in_worker`` of ``template`` (already past ``refusals``), in a confined worker.

    ``WorkerTimeout`` or ``WorkerDied`` when it could not be parsed within the limits.
    """
    request = {"template": template, "definitions": _definitions(template)}
    result: dict[str, Any] = await workers().call(f"{__name__}:parse_in_worker", request)
    return result


@cache
def workers() -> Workers:
    """The API's TOSCA workers: two, started at the first template. They parse clusters'
    templates (here) and applications' (``shoal.model.app_tosca``)."""
    apps = "shoal.model.app_tosca"
    return Workers(
        [f"{__name__}:parse_in_worker", f"{apps}:translate_in_worker", f"{apps}:csar_in_worker"],
        warm=[f"{__name__}:warm", f"{apps}:warm"],
        size=2,
        timeout=PARSE_SECONDS,
        cpu_seconds=PARSE_CPU_SECONDS,
        memory_bytes=PARSE_MEMORY,
    )


def load_yaml(text: str) -> Any:
    """A template read from a URL, as data. Its YAML may not use aliases (``*name``: a few
    aliases of aliases stand for billions of nodes once the template is walked or sent to
    a worker) nor nest deeper than ``MAX_DEPTH``; only plain YAML types are read.

    ``yaml.YAMLError`` names what is refused and where.
    """
    loader = _TemplateLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _TemplateLoader(yaml.SafeLoader):
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a template: write it out", mark
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than a template may be ({MAX_DEPTH})", mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


# before parsing: on the API ----------------------------------------------------------------


def refusals(template: dict[str, Any]) -> list[Problem]:
    """What is refused before any parse: a missing version or kubeconfig output, a template
    too big, and ``imports`` or ``repositories`` an administrator has not allowed."""
    if not isinstance(template.get("tosca_definitions_version"), str):
        return [("tosca_definitions_version", "is required (tosca_simple_yaml_1_0 …)")]
    topology = template.get("topology_template")
    topology = topology if isinstance(topology, dict) else {}
    outputs = topology.get("outputs") or {}
    if not isinstance(outputs, dict) or not outputs.get("kubeconfig"):
        return [
            (
                "topology_template.outputs.kubeconfig",
                "is required: the built cluster's "
                "kubeconfig comes from it (and Krake's clients refuse a cluster without it)",
            )
        ]
    return shape_refusals(template, set(allowed_imports()))


def shape_refusals(template: dict[str, Any], allowed: set[str]) -> list[Problem]:
    """A template too big or too deep, and its ``imports`` or ``repositories`` other than
    the imports ``allowed`` (by the name each gives): what any template is refused for."""
    if not isinstance(template.get("tosca_definitions_version"), str):
        return [("tosca_definitions_version", "is required (tosca_simple_yaml_1_0 …)")]
    topology = template.get("topology_template")
    topology = topology if isinstance(topology, dict) else {}
    found: list[Problem] = []
    nodes = topology.get("node_templates")
    if isinstance(nodes, dict) and len(nodes) > MAX_NODE_TEMPLATES:
        found.append(
            (
                "topology_template.node_templates",
                f"has {len(nodes)} node templates: at most {MAX_NODE_TEMPLATES}",
            )
        )
    for section in _TYPE_SECTIONS:
        types = template.get(section)
        if isinstance(types, dict) and len(types) > MAX_TYPES:
            found.append((section, f"has {len(types)} types: at most {MAX_TYPES}"))
    for where, key, value in _keys(template):
        if key == "depth":
            found.append((where, f"is nested deeper than a template may be ({MAX_DEPTH})"))
        elif key == "repositories":
            found.append((where, "repositories are not read here: give types inline"))
        elif where != "imports" or not isinstance(value, list):
            found.append(
                (
                    where,
                    "imports are not read here: give types inline, or import "
                    f"what an administrator allows ({IMPORTS_SETTING})",
                )
            )
        else:
            for index, entry in enumerate(value):
                if import_name(entry) not in allowed:
                    found.append(
                        (
                            join(where, index),
                            "is not an import an administrator "
                            f"allows ({IMPORTS_SETTING}): give types inline",
                        )
                    )
    return found


def _keys(template: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """Every ``imports`` or ``repositories`` key, at any depth (a type, a node, a topology);
    ``("", "depth", None)`` once for a template nested deeper than ``MAX_DEPTH``."""
    stack: list[tuple[Any, str, int]] = [(template, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            yield where, "depth", None
            return
        if isinstance(value, dict):
            for key, item in value.items():
                path = join(where, str(key))
                if key in _REFUSED_KEYS:
                    yield path, key, item
                else:
                    stack.append((item, path, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, join(where, i), depth + 1) for i, item in enumerate(value))


def import_name(entry: Any) -> str | None:
    """The name an import gives: ``NAME``, ``{x: NAME}`` or ``{x: {file: NAME}}``; None with
    a repository or anything else."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        (value,) = entry.values()
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and set(value) <= {"file", "namespace_prefix"}:
            name = value.get("file")
            return name if isinstance(name, str) else None
    return None


def allowed_imports() -> dict[str, str]:
    """``SHOAL_TOSCA_IMPORTS`` as import name → the local file an administrator gives for it."""
    allowed = {}
    for entry in os.environ.get(IMPORTS_SETTING, "").split(","):
        name, _, path = entry.strip().partition("=")
        if name:
            allowed[name] = path or name
    return allowed


def _definitions(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The type definitions of the allowed files ``template`` imports, read here."""
    allowed = allowed_imports()
    found = []
    for entry in template.get("imports") or []:
        found.append(read_definitions(allowed[str(import_name(entry))]))
    return found


@cache
def read_definitions(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path) as file:
            loaded = yaml.safe_load(file)
    except yaml.YAMLError as error:
        raise OSError(f"{path}: not YAML") from error
    if not isinstance(loaded, dict):
        raise OSError(f"{path}: not a mapping of TOSCA types")
    return {k: v for k, v in loaded.items() if k in _TYPE_SECTIONS and isinstance(v, dict)}


# in the worker -----------------------------------------------------------------------------


def parse_in_worker(request: dict[str, Any]) -> dict[str, Any]:
    """Parse ``request["template"]`` with tosca-parser (the allowed imports' definitions
    merged in); answer its problems (field, reason) and its node templates."""
    template = with_definitions(request["template"], request.get("definitions") or [])
    found = list(_property_problems(template))
    if found:
        return {"problems": found, "node_templates": {}}
    from toscaparser.common.exception import ExceptionCollector, ValidationError
    from toscaparser.tosca_template import ToscaTemplate

    nodes: dict[str, Any] = {}
    try:
        parsed = ToscaTemplate(yaml_dict_tpl=template, a_file=False)
        for node in parsed.nodetemplates or ():
            nodes[node.name] = {
                "type": node.type,
                "compute": bool(node.is_derived_from("tosca.nodes.Compute")),
            }
    except ValidationError:
        found = [("", message(e)) for e in ExceptionCollector.getExceptions()]
        found = found or [("", "is not a valid TOSCA template")]
    except Exception:  # tosca-parser stops with a bare error on some input it collected
        found = [("", message(e)) for e in ExceptionCollector.getExceptions()]
        found = found or [("", "is not a valid TOSCA template (the parser could not read it)")]
    finally:
        ExceptionCollector.stop()
        ExceptionCollector.clear()
    return {"problems": found, "node_templates": nodes if not found else {}}


def with_definitions(template: dict[str, Any], definitions: list[dict[str, Any]]) -> dict[str, Any]:
    """``template`` without its ``imports``, the type definitions they stand for merged in
    (the template's own types win)."""
    template = dict(template)
    template.pop("imports", None)
    for each in definitions:
        for section, types in each.items():
            own = template.get(section)
            if own is None or isinstance(own, dict):  # else the parser says what is wrong
                template[section] = {**types, **(own or {})}
    return template


def warm(_: Any = None) -> None:
    """Import and run what a parse needs once, before the worker loses its files."""
    parse_in_worker({"template": {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "topology_template": {"node_templates": {"node": {
            "type": "tosca.nodes.Compute",
            "capabilities": {"host": {"properties": {"num_cpus": 1, "mem_size": "1 GB"}}},
        }}},
    }})  # fmt: skip


def _property_problems(template: dict[str, Any]) -> Iterator[Problem]:
    """Wrong types in the properties Shoal reads of a compute node (``node_shape``)."""
    topology = template.get("topology_template")
    nodes = topology.get("node_templates") if isinstance(topology, dict) else None
    for name, node in (nodes or {}).items() if isinstance(nodes, dict) else ():
        capabilities = node.get("capabilities") if isinstance(node, dict) else None
        if not isinstance(capabilities, dict):
            continue
        where = join("topology_template.node_templates", str(name), "capabilities")
        scalable = capabilities.get("scalable")
        scaling = scalable.get("properties") if isinstance(scalable, dict) else None
        if isinstance(scaling, dict) and "default_instances" in scaling:
            missing = [k for k in ("min_instances", "max_instances") if k not in scaling]
            if missing:
                yield (join(where, "scalable.properties"), "default_instances needs "
                       f"{' and '.join(missing)} beside it (the bounds it must lie between)")
        for capability, key, kind in _SHAPE_PROPERTIES:
            found = capabilities.get(capability)
            properties = found.get("properties") if isinstance(found, dict) else None
            if not isinstance(properties, dict) or key not in properties:
                continue
            value = properties[key]
            reason = _wrong_type(value, kind)
            if reason:
                yield join(where, capability, "properties", key), reason


_SHAPE_PROPERTIES = (
    ("host", "num_cpus", "integer"),
    ("host", "mem_size", "size"),
    ("host", "disk_size", "size"),
    ("scalable", "default_instances", "integer"),
    ("scalable", "min_instances", "integer"),
    ("scalable", "max_instances", "integer"),
    ("scalable", "count", "integer"),
)


def _wrong_type(value: Any, kind: str) -> str | None:
    if isinstance(value, dict):
        return None  # a function (get_input …): tosca-parser checks it
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {value!r}"[:200]
        return None if value >= 0 else "must not be negative"
    if not isinstance(value, str) or SIZE.match(value) is None:
        return f"must be a size such as '4 GB' or '512 MiB', not {value!r}"[:200]
    return None


def message(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    return f"{type(error).__name__}: {text}".strip()[:1000]
