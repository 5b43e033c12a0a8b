"""Decode the few Kubernetes protobuf bodies kubectl's typed clients send.

kubectl's generators (``kubectl create namespace|configmap|secret|serviceaccount``)
post protobuf, not JSON, and do not fall back on 415. Full protobuf support would
need every generated schema; this decoder knows the handful of small kinds those
commands create. Everything else gets 415 (use ``kubectl apply``/``create -f``,
which send JSON).
"""

from __future__ import annotations

import base64
from typing import Any

from shoal.machinery.types import Obj

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body this decoder does not understand."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs; length-delimited values stay bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _varint(buf, pos)
            out.append((num, val))
        elif wire == 2:
            n, pos = _varint(buf, pos)
            out.append((num, buf[pos:pos + n]))
            pos += n
        elif wire == 1:
            out.append((num, int.from_bytes(buf[pos:pos + 8], "little")))
            pos += 8
        elif wire == 5:
            out.append((num, int.from_bytes(buf[pos:pos + 4], "little")))
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _s(v: int | bytes) -> str:
    if isinstance(v, int):
        raise ProtobufError("expected a string")
    return v.decode()


def _b(v: int | bytes) -> bytes:
    if isinstance(v, int):
        raise ProtobufError("expected bytes")
    return v


def _map(entries: list[bytes], binary: bool = False) -> dict[str, str]:
    out = {}
    for entry in entries:
        kv = dict(fields(entry))
        key = _s(kv.get(1, b""))
        raw = _b(kv.get(2, b""))
        out[key] = base64.b64encode(raw).decode() if binary else raw.decode()
    return out


# How a message's fields become JSON: field number → (JSON name, how to read it).
# "map"/"bytes map" fields repeat (one entry each); "strings" is a repeated string.
Schema = dict[int, tuple[str, str]]

_META: Schema = {
    1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
    6: ("resourceVersion", "string"), 11: ("labels", "map"), 12: ("annotations", "map"),
    14: ("finalizers", "strings"),
}

SCHEMAS: dict[tuple[str, str], Schema] = {
    ("v1", "Namespace"): {1: ("metadata", "meta"), 2: ("spec", "namespace spec")},
    ("v1", "ConfigMap"): {1: ("metadata", "meta"), 2: ("data", "map"),
                          3: ("binaryData", "bytes map"), 4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", "meta"), 2: ("data", "bytes map"), 3: ("type", "string"),
                       4: ("stringData", "map"), 5: ("immutable", "bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", "meta")},
}


def _message(buf: bytes, schema: Schema) -> Obj:
    obj: Obj = {}
    repeated: dict[str, list[Any]] = {}
    for num, val in fields(buf):
        if num not in schema:
            continue
        name, how = schema[num]
        if how == "string":
            obj[name] = _s(val)
        elif how == "bool":
            obj[name] = bool(val)
        elif how == "meta":
            meta = _message(_b(val), _META)
            obj[name] = {k: v for k, v in meta.items() if v != ""}
        elif how == "namespace spec":
            obj[name] = _message(_b(val), {1: ("finalizers", "strings")})
        else:
            repeated.setdefault(name, []).append(_s(val) if how == "strings" else _b(val))
    for name, how in schema.values():
        if name in repeated:
            values = repeated[name]
            obj[name] = values if how == "strings" else _map(values, binary=how == "bytes map")
    return obj


def decode(body: bytes) -> Obj:
    """Decode a ``k8s\\0``-enveloped protobuf object into its JSON form."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope")
    unknown = dict(fields(body[len(MAGIC):]))
    type_meta = dict(fields(_b(unknown.get(1, b""))))
    api_version = _s(type_meta.get(1, b""))
    kind = _s(type_meta.get(2, b""))
    schema = SCHEMAS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"protobuf bodies of {api_version} {kind} are not supported")
    obj = _message(_b(unknown.get(2, b"")), schema)
    if "secret" == kind.lower() and "stringData" in obj:
        data = obj.setdefault("data", {})
        for k, v in obj.pop("stringData").items():
            data[k] = base64.b64encode(v.encode()).decode()
    return {"apiVersion": api_version, "kind": kind, **obj}
