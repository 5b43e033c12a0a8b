"""Every Krake kind, read back from Shoal's secured API, has the keys Krake's own schema
writes for it: Krake's fields, null or not, and no Shoal addition while it is empty.

Krake's classes (krake 1.0.1, in its virtualenv) read each document and serialise it
again; the two key sets must be equal but for what Shoal always adds on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.api.server import ApiServer
from shoal.model import krake
from shoal.testing import shipped
from tests.api.samples import SAMPLES, Sample
from tests.krake.conftest import run_krake

pytestmark = [pytest.mark.integration]

ALWAYS_ADDED = {
    "metadata.resource_version": "Shoal's compare-and-swap: every read carries the revision",
}
"""Keys Shoal adds to every document of a Krake kind, and why (docs/from-krake.md)."""
SET_BY_THE_API = {
    "spec.openstack.infrastructure_provider.uid": "the provider the cloud's name resolved to",
    "spec.openstack.infrastructure_provider.url": "that provider's URL when it was resolved",
}
"""Keys of a cloud that Shoal's API sets at each write: its password goes to that provider."""


def keys(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON document (``a.b``, ``a[].b`` inside lists)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{prefix}.{key}" if prefix else key
            found |= {path} | keys(inner, path)
    elif isinstance(value, list):
        for item in value:
            found |= keys(item, prefix + "[]")
    return found


def _body(sample: Sample) -> dict[str, Any]:
    body = sample.body("shape", "krake" if sample.namespaced else None)
    if sample.kind in ("Cloud", "GlobalCloud"):  # required in Krake's schema
        body["spec"]["openstack"]["infrastructure_provider"] = {"name": "im"}
    return body


async def test_every_krake_kind_reads_back_with_krake_s_keys(
    api: ApiServer, krake_python: str, tmp_path: Path
) -> None:
    headers = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
    async with httpx.AsyncClient(base_url=api.url, headers=headers, timeout=30) as http:
        read = await _read_back(http)
    assert len(read) == 12  # every Krake kind but the binding bodies
    documents = tmp_path / "documents.json"
    documents.write_text(json.dumps(read))
    lines = await run_krake(krake_python, "shape_probe.py", str(documents))
    refused = {line["kind"]: line["error"] for line in lines if "error" in line}
    assert refused == {}
    for line in lines:
        kind = line["kind"]
        ours = keys(read[kind]) - set(ALWAYS_ADDED)
        if kind in ("Cloud", "GlobalCloud"):
            ours -= set(SET_BY_THE_API)
        assert ours == keys(line["krake"]), (kind, ours ^ keys(line["krake"]))


async def _read_back(http: httpx.AsyncClient) -> dict[str, Any]:
    """Each Krake kind's sample, created as a Krake client writes it, and read back."""
    read: dict[str, Any] = {}
    for sample in [s for s in SAMPLES if s.kind in krake.FIELDS]:
        body = _body(sample)
        if sample.kind == "Metric":
            body["spec"].pop("allowed_values")  # as a Krake client writes it
        collection = sample.collection("krake")
        response = await http.post(collection, json=body)
        assert response.status_code in (200, 201), (sample.kind, response.text)
        read[sample.kind] = (await http.get(f"{collection}/shape")).json()
    return read
