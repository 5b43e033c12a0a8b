"""Applications given as a TOSCA template or a CSAR archive, turned into their manifest.

Krake's rules, which Krake's clients rely on:

- every node template of the topology is a Kubernetes object: its type is
  ``tosca.nodes.indigo.KubernetesObject`` (or a type derived from it), and its
  ``properties.spec`` holds the object, as YAML text. The text may be built with
  ``concat``, ``get_input`` (the input's default, after a space, as Krake writes
  it) and ``get_property``; a mapping is taken as the object itself. A node of
  another type, or one whose ``spec`` is empty, is refused;
- the import of those types that Krake's examples name (``ec3_custom_types``,
  ``EC3_TYPES``) is known to Shoal: its ``KubernetesObject`` type is built in, and
  nothing is fetched. Other imports follow ``SHOAL_TOSCA_IMPORTS``
  (``shoal.model.tosca``);
- a CSAR is a zip archive whose ``TOSCA-Metadata/TOSCA.meta`` names the template
  (``Entry-Definitions``); without that file, the one ``.yaml``/``.yml`` file at its
  root is the template. An archive is read in memory, never unpacked: one larger
  than ``CSAR_LIMIT`` bytes, or than ``CSAR_UNPACKED_LIMIT`` once unpacked, one with
  more than ``CSAR_MEMBERS`` files, or one that names a file outside itself (an
  absolute path, ``..``, a backslash) is refused.

Templates and archives are read in the confined TOSCA workers
(``shoal.model.tosca.workers``: no files, no network, CPU, memory and time
limits), never on the API's event loop. Each problem names its field under the
field the template came from (``spec.tosca``, ``spec.csar``).
"""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import zipfile
from typing import Any

import yaml

from shoal.machinery.confined import WorkerError
from shoal.machinery.paths import join
from shoal.model import tosca

KUBERNETES_OBJECT = "tosca.nodes.indigo.KubernetesObject"
EC3_TYPES = "https://raw.githubusercontent.com/grycap/ec3/tosca/tosca/custom_types.yaml"
"""The import Krake's examples give for ``KUBERNETES_OBJECT``."""
BUILT_IN_TYPES: dict[str, Any] = {
    "node_types": {
        KUBERNETES_OBJECT: {
            "derived_from": "tosca.nodes.Root",
            "properties": {
                "spec": {
                    "type": "string",
                    "required": True,
                    "description": "The Kubernetes object, as YAML.",
                }
            },
        }
    }
}
"""What Shoal knows of ``EC3_TYPES``: the one type an application's template may use."""
TEMPLATE_LIMIT = 1 << 20
"""The largest template read from a URL or from an archive, in bytes."""
CSAR_LIMIT = 4 << 20
"""The largest archive read from a URL, in bytes."""
CSAR_UNPACKED_LIMIT = 16 << 20
"""The most an archive's files may hold once unpacked, in bytes, all together."""
CSAR_MEMBERS = 1000
META_FILE = "TOSCA-Metadata/TOSCA.meta"
MAX_OBJECTS = 500

Problem = tuple[str, str]


class TemplateRefused(Exception):
    """A template or archive Shoal does not deploy: each problem is (field, reason)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(f"{field}: {reason}" for field, reason in problems))
        self.problems = problems


def _under(base: str, found: list[Any]) -> list[Problem]:
    return [(join(base, where) if where else base, why) for where, why in found]


def allowed_imports() -> dict[str, str | None]:
    """Import name → the administrator's file of its types, or None for the types built in."""
    allowed: dict[str, str | None] = {EC3_TYPES: None}
    allowed.update(tosca.allowed_imports())
    return allowed


async def manifest_of(template: Any, base: str) -> list[dict[str, Any]]:
    """The Kubernetes objects ``template`` (from the field ``base``) stands for.

    ``TemplateRefused`` names what is wrong; parsed once, in a confined worker."""
    if not isinstance(template, dict):
        raise TemplateRefused([(base, "must be a TOSCA template (a mapping)")])
    allowed = allowed_imports()
    found = tosca.shape_refusals(template, set(allowed))
    if found:
        raise TemplateRefused(_under(base, found))
    try:
        definitions = _definitions(template, allowed)
    except OSError:  # an administrator's file of allowed types
        raise TemplateRefused([(join(base, "imports"), "an allowed import could not be read "
                                "here (ask an administrator)")]) from None  # fmt: skip
    request = {"template": template, "definitions": definitions}
    try:
        result = await tosca.workers().call(f"{__name__}:translate_in_worker", request)
    except WorkerError as error:
        raise TemplateRefused([tosca.worker_problem(error, base)]) from None
    if result["problems"]:
        raise TemplateRefused(_under(base, result["problems"]))
    manifest: list[dict[str, Any]] = result["manifest"]
    return manifest


async def template_of_csar(archive: bytes, base: str) -> Any:
    """The entry template of the CSAR ``archive`` (from the field ``base``), as data.

    ``TemplateRefused`` names what is wrong; the archive is read in a confined worker."""
    if len(archive) > CSAR_LIMIT:
        raise TemplateRefused([(base, f"the archive is larger than {CSAR_LIMIT} bytes")])
    request = {"archive": base64.b64encode(archive).decode()}
    try:
        result = await tosca.workers().call(f"{__name__}:csar_in_worker", request)
    except WorkerError as error:
        raise TemplateRefused([tosca.worker_problem(error, base)]) from None
    if result["problems"]:
        raise TemplateRefused([(base, why) for why in result["problems"]])
    return result["template"]


def _definitions(template: dict[str, Any], allowed: dict[str, str | None]) -> list[dict[str, Any]]:
    found = []
    for entry in template.get("imports") or []:
        path = allowed[str(tosca.import_name(entry))]
        found.append(BUILT_IN_TYPES if path is None else tosca.read_definitions(path))
    return found


# in the worker -----------------------------------------------------------------------------


def translate_in_worker(request: dict[str, Any]) -> dict[str, Any]:
    """The objects of ``request["template"]``: ``{"problems": [(where, why)], "manifest": […]}``."""
    from toscaparser.common.exception import ExceptionCollector

    template = tosca.with_definitions(request["template"], request.get("definitions") or [])
    manifest: list[dict[str, Any]] = []
    try:
        parsed = _parse(template)
        if isinstance(parsed, list):
            return {"problems": parsed, "manifest": []}
        nodes = list(parsed.nodetemplates or ())
        if not nodes:
            where = "topology_template.node_templates"
            return {"problems": [(where, "holds no Kubernetes object: nothing to deploy")],
                    "manifest": []}  # fmt: skip
        if len(nodes) > MAX_OBJECTS:
            where = "topology_template.node_templates"
            return {"problems": [(where, f"more than {MAX_OBJECTS} objects")], "manifest": []}
        for node in nodes:
            where = join("topology_template.node_templates", node.name)
            if not node.is_derived_from(KUBERNETES_OBJECT):
                return {"problems": [(join(where, "type"), f"{node.type} is not a Kubernetes "
                                      f"object: every node must be a {KUBERNETES_OBJECT}")],
                        "manifest": []}  # fmt: skip
            obj, why = _object(parsed, node)
            if why is not None:
                return {"problems": [(join(where, "properties.spec"), why)], "manifest": []}
            manifest.append(obj)
    finally:
        ExceptionCollector.stop()
        ExceptionCollector.clear()
    return {"problems": [], "manifest": manifest}


def _parse(template: dict[str, Any]) -> Any:
    """tosca-parser's template, or the problems it found."""
    from toscaparser.common.exception import ExceptionCollector, ValidationError
    from toscaparser.tosca_template import ToscaTemplate

    try:
        return ToscaTemplate(yaml_dict_tpl=template, a_file=False)
    except ValidationError:
        found = [("", tosca.message(e)) for e in ExceptionCollector.getExceptions()]
        return found or [("", "is not a valid TOSCA template")]
    except Exception:  # tosca-parser stops with a bare error on some input it collected
        found = [("", tosca.message(e)) for e in ExceptionCollector.getExceptions()]
        return found or [("", "is not a valid TOSCA template (the parser could not read it)")]


def _object(parsed: Any, node: Any) -> tuple[dict[str, Any], str | None]:
    """The Kubernetes object of ``node``, or why there is none."""
    spec = node.get_property_value("spec")
    if not spec:
        return {}, "must not be empty: it holds the Kubernetes object"
    if isinstance(spec, dict) and not _is_function(spec):
        text: Any = spec
    else:
        try:
            text = _text(parsed, node, spec)
        except Exception as error:  # a function tosca-parser could not resolve, or ours
            return {}, f"cannot be read: {tosca.message(error)}"
        try:
            text = tosca.load_yaml(text)
        except yaml.YAMLError as error:
            return {}, f"is not YAML: {error}"[:1000]
    if not isinstance(text, dict) or not text.get("kind") or not text.get("apiVersion"):
        return {}, "must be one Kubernetes object (with apiVersion and kind)"
    return text, None


def _is_function(value: dict[str, Any]) -> bool:
    from toscaparser.functions import function_mappings

    return len(value) == 1 and next(iter(value)) in function_mappings


def _text(parsed: Any, node: Any, value: Any) -> str:
    """``value`` as text, its ``concat``, ``get_input`` and ``get_property`` resolved as
    Krake resolves them."""
    from toscaparser.functions import Concat, GetInput, GetProperty, get_function, is_function

    function = get_function(tosca_tpl=parsed, node_template=node, raw_function=value)
    if not is_function(function):
        if isinstance(function, dict | list):
            raise ValueError(f"a {type(function).__name__} where text was expected")
        return str(function)
    if isinstance(function, Concat):
        return "".join(_text(parsed, node, item) for item in function.args)
    if isinstance(function, GetInput):
        inputs = [i for i in parsed.inputs if i.name == function.input_name]
        if not inputs:
            raise ValueError(f"no input {function.input_name!r}")
        return " " + str(inputs[0].default)
    if isinstance(function, GetProperty):
        return _text(parsed, node, function.result())
    raise ValueError(f"the function {function.name} is not supported (concat, get_input and "
                     "get_property are)")  # fmt: skip


def csar_in_worker(request: dict[str, Any]) -> dict[str, Any]:
    """The entry template of the archive ``request["archive"]`` (base64):
    ``{"problems": [why], "template": …}``."""
    try:
        archive = base64.b64decode(request["archive"], validate=True)
        with zipfile.ZipFile(io.BytesIO(archive)) as opened:
            template = _entry_template(opened)
    except _Refused as refused:
        return {"problems": [str(refused)], "template": None}
    except (zipfile.BadZipFile, binascii.Error, EOFError, ValueError) as error:
        return {"problems": [f"is not a zip archive (a CSAR): {error}"[:1000]], "template": None}
    return {"problems": [], "template": template}


class _Refused(Exception):
    pass


def _entry_template(archive: zipfile.ZipFile) -> Any:
    members = archive.infolist()
    if len(members) > CSAR_MEMBERS:
        raise _Refused(f"the archive holds more than {CSAR_MEMBERS} files")
    names: dict[str, zipfile.ZipInfo] = {}
    unpacked = 0
    for member in members:
        if not _inside(member.filename):
            raise _Refused(f"the archive names a file outside itself: {member.filename[:200]!r}")
        unpacked += member.file_size
        names[posixpath.normpath(member.filename)] = member
    if unpacked > CSAR_UNPACKED_LIMIT:
        raise _Refused(f"the archive holds more than {CSAR_UNPACKED_LIMIT} bytes once unpacked")
    if META_FILE in names:
        meta = _read(archive, names[META_FILE]).decode(errors="replace")
        entry = _entry_definitions(meta)
        if not _inside(entry):
            raise _Refused(f"{META_FILE}: Entry-Definitions names a file outside the archive")
        entry = posixpath.normpath(entry)
        if entry not in names:
            raise _Refused(f"{META_FILE}: Entry-Definitions names {entry[:200]!r}, which the "
                           "archive does not hold")  # fmt: skip
    else:
        roots = [n for n in names if "/" not in n and n.endswith((".yaml", ".yml"))]
        if len(roots) != 1:
            raise _Refused(f"the archive has no {META_FILE} naming its template, and not one "
                           "single .yaml file at its root")  # fmt: skip
        entry = roots[0]
    text = _read(archive, names[entry]).decode(errors="replace")
    try:
        return tosca.load_yaml(text)
    except yaml.YAMLError as error:
        raise _Refused(f"{entry[:200]} is not YAML: {error}"[:1000]) from None


def _inside(name: str) -> bool:
    """Whether the archive's file ``name`` stays inside the archive."""
    if not name or "\\" in name or name.startswith("/") or "\x00" in name:
        return False
    if len(name) > 1 and name[1] == ":":  # a drive letter
        return False
    return ".." not in name.split("/")


def _read(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bytes:
    """The file's bytes, never more than ``TEMPLATE_LIMIT`` whatever its header says."""
    with archive.open(member) as file:
        data = file.read(TEMPLATE_LIMIT + 1)
    if len(data) > TEMPLATE_LIMIT:
        raise _Refused(f"{member.filename[:200]} is larger than {TEMPLATE_LIMIT} bytes")
    return data


def _entry_definitions(meta: str) -> str:
    for line in meta.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Entry-Definitions":
            return value.strip()
    raise _Refused(f"{META_FILE} has no Entry-Definitions")


def warm(_: Any = None) -> None:
    """Import and run what a translation and an archive need once, before confinement."""
    translate_in_worker({"template": {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        "topology_template": {
            "inputs": {"port": {"type": "integer", "default": 80}},
            "node_templates": {"pod": {
                "type": KUBERNETES_OBJECT,
                "properties": {"spec": {"concat": ["apiVersion: v1\nkind: Pod\nport:",
                                                   {"get_input": "port"}]}},
            }},
        },
    }, "definitions": [BUILT_IN_TYPES]})  # fmt: skip
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("t.yaml", "a: 1\n")
    csar_in_worker({"archive": base64.b64encode(buffer.getvalue()).decode()})
