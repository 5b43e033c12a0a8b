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

Obj = dict[str, Any]
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


def _meta(buf: bytes) -> Obj:
    meta: Obj = {}
    labels: list[bytes] = []
    annotations: list[bytes] = []
    finalizers: list[str] = []
    for num, val in fields(buf):
        if num == 1:
            meta["name"] = _s(val)
        elif num == 2:
            meta["generateName"] = _s(val)
        elif num == 3:
            meta["namespace"] = _s(val)
        elif num == 6:
            meta["resourceVersion"] = _s(val)
        elif num == 11:
            labels.append(_b(val))
        elif num == 12:
            annotations.append(_b(val))
        elif num == 14:
            finalizers.append(_s(val))
    if labels:
        meta["labels"] = _map(labels)
    if annotations:
        meta["annotations"] = _map(annotations)
    if finalizers:
        meta["finalizers"] = finalizers
    return {k: v for k, v in meta.items() if v != ""}


def _namespace(parts: list[tuple[int, int | bytes]]) -> Obj:
    obj: Obj = {}
    for num, val in parts:
        if num == 1:
            obj["metadata"] = _meta(_b(val))
        elif num == 2:
            fin = [_s(v) for n, v in fields(_b(val)) if n == 1]
            obj["spec"] = {"finalizers": fin} if fin else {}
    return obj


def _configmap(parts: list[tuple[int, int | bytes]]) -> Obj:
    obj: Obj = {}
    data = [_b(v) for n, v in parts if n == 2]
    binary = [_b(v) for n, v in parts if n == 3]
    for num, val in parts:
        if num == 1:
            obj["metadata"] = _meta(_b(val))
        elif num == 4:
            obj["immutable"] = bool(val)
    if data:
        obj["data"] = _map(data)
    if binary:
        obj["binaryData"] = _map(binary, binary=True)
    return obj


def _secret(parts: list[tuple[int, int | bytes]]) -> Obj:
    obj: Obj = {}
    data = [_b(v) for n, v in parts if n == 2]
    string_data = [_b(v) for n, v in parts if n == 4]
    for num, val in parts:
        if num == 1:
            obj["metadata"] = _meta(_b(val))
        elif num == 3:
            obj["type"] = _s(val)
        elif num == 5:
            obj["immutable"] = bool(val)
    if data:
        obj["data"] = _map(data, binary=True)
    if string_data:
        obj["stringData"] = _map(string_data)
    return obj


def _metadata_only(parts: list[tuple[int, int | bytes]]) -> Obj:
    obj: Obj = {}
    for num, val in parts:
        if num == 1:
            obj["metadata"] = _meta(_b(val))
    return obj


DECODERS = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _metadata_only,
}


def decode(body: bytes) -> Obj:
    """Decode a ``k8s\\0``-enveloped protobuf object into its JSON form."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope")
    unknown = dict(fields(body[len(MAGIC):]))
    type_meta = dict(fields(_b(unknown.get(1, b""))))
    api_version = _s(type_meta.get(1, b""))
    kind = _s(type_meta.get(2, b""))
    decoder = DECODERS.get((api_version, kind))
    if decoder is None:
        raise ProtobufError(f"protobuf bodies of {api_version} {kind} are not supported")
    obj = decoder(fields(_b(unknown.get(2, b""))))
    if "secret" == kind.lower() and "stringData" in obj:
        data = obj.setdefault("data", {})
        for k, v in obj.pop("stringData").items():
            data[k] = base64.b64encode(v.encode()).decode()
    return {"apiVersion": api_version, "kind": kind, **obj}
