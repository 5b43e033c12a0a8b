"""A tenant's CSAR archive or TOSCA template URL cannot make the API read past what it
allows: archives that name files outside themselves, archives too big packed or unpacked,
URLs the administrator does not allow, and templates that hold nothing to deploy are all
refused with a 422 naming the field, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.client.rest import ApiError, NotFound, ShoalClient
from shoal.machinery import outbound
from shoal.model import app_tosca
from shoal.model.kubernetes import Application
from tests.conftest import Tenant
from tests.fixtures.templates import Files, archive, csar, serving_files, template

NS = "a"


@pytest.fixture
async def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Files]:
    async with serving_files(tmp_path, monkeypatch) as served:
        yield served


async def refused(client: ShoalClient, name: str, **spec: Any) -> dict[str, Any]:
    """The 422 a create of application ``name`` gets; nothing stored."""
    body = Application.model_validate(
        {"metadata": {"name": name, "namespace": NS}, "spec": spec}
    )
    with pytest.raises(ApiError) as error:
        await client.create(body)
    assert error.value.status == 422, error.value
    with pytest.raises(NotFound):
        await client.get(Application, name, NS)
    errors: list[dict[str, Any]] = error.value.problem["errors"]
    return errors[0]


GOOD = yaml.safe_dump(template("nginx:1", 1)).encode()


async def test_an_archive_naming_files_outside_itself_is_refused(
    tenant: Tenant, files: Files
) -> None:
    alice = await tenant("alice", NS)
    files.documents["/up.csar"] = archive({"../../etc/app.yaml": GOOD},
                                          entry="../../etc/app.yaml")  # fmt: skip
    files.documents["/abs.zip"] = archive({"/etc/app.yaml": GOOD}, entry="/etc/app.yaml")
    for path in ("/up.csar", "/abs.zip"):
        error = await refused(alice, "up", csar=files.url(path))
        assert error["field"] == "spec.csar"
        assert "outside itself" in error["reason"]
    files.documents["/entry.csar"] = archive({"app.yaml": GOOD}, entry="x/../../app.yaml")
    error = await refused(alice, "entry", csar=files.url("/entry.csar"))
    assert error["field"] == "spec.csar" and "outside the archive" in error["reason"]
    files.documents["/inner.csar"] = archive({"app.yaml": GOOD, "x/../../y": b""})
    error = await refused(alice, "inner", csar=files.url("/inner.csar"))
    assert error["field"] == "spec.csar" and "outside itself" in error["reason"]


async def test_archives_too_big_packed_or_unpacked_are_refused(
    tenant: Tenant, files: Files
) -> None:
    alice = await tenant("alice", NS)
    # packed: more than the limit is never read
    files.documents["/big.csar"] = b"PK" + b"\0" * app_tosca.CSAR_LIMIT
    error = await refused(alice, "big", csar=files.url("/big.csar"))
    assert error["field"] == "spec.csar" and "more than" in error["reason"]
    # unpacked: a few kilobytes of zeros that would unpack to twice the limit
    bomb = b"\0" * (2 * app_tosca.CSAR_UNPACKED_LIMIT)
    files.documents["/bomb.csar"] = archive({"app.yaml": GOOD, "zeros": bomb})
    assert len(files.documents["/bomb.csar"]) < 100_000
    error = await refused(alice, "bomb", csar=files.url("/bomb.csar"))
    assert error == {
        "field": "spec.csar",
        "reason": f"the archive holds more than {app_tosca.CSAR_UNPACKED_LIMIT} bytes once "
        "unpacked",
    }
    # too many files to list
    files.documents["/many.csar"] = archive(
        {f"f{i}": b"" for i in range(app_tosca.CSAR_MEMBERS + 1)}
    )
    error = await refused(alice, "many", csar=files.url("/many.csar"))
    assert error["field"] == "spec.csar" and "files" in error["reason"]


async def test_urls_the_administrator_does_not_allow_are_never_read(
    tenant: Tenant, files: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = await tenant("alice", NS)
    files.documents["/app.csar"] = csar(template("nginx:1", 1))
    files.documents["/app.yaml"] = GOOD
    # a prefix SHOAL_TOSCA_URLS does not list
    monkeypatch.setenv("SHOAL_TOSCA_URLS", "https://templates.example.org/")
    error = await refused(alice, "csar", csar=files.url("/app.csar"))
    assert error["field"] == "spec.csar" and "SHOAL_TOSCA_URLS" in error["reason"]
    error = await refused(alice, "url", tosca=files.url("/app.yaml"))
    assert error["field"] == "spec.tosca" and "SHOAL_TOSCA_URLS" in error["reason"]
    # an allowed prefix on loopback, which the outbound policy does not list
    monkeypatch.setenv("SHOAL_TOSCA_URLS", files.url("/"))
    policy = tmp_path / "strict.yaml"
    policy.write_text("networks: []\n")
    monkeypatch.setenv(outbound.SETTING, str(policy))
    error = await refused(alice, "loop", csar=files.url("/app.csar"))
    assert error["field"] == "spec.csar" and "loopback" in error["reason"]
    assert files.reads == []


async def test_templates_that_deploy_nothing_are_refused(tenant: Tenant, files: Files) -> None:
    alice = await tenant("alice", NS)
    hollow = template("nginx:1", 1)
    hollow["topology_template"]["node_templates"]["web-service"]["properties"]["spec"] = ""
    error = await refused(alice, "hollow", tosca=hollow)
    assert error["field"] == (
        "spec.tosca.topology_template.node_templates.web-service.properties.spec"
    )
    files.documents["/no-meta.csar"] = archive({"a.yaml": GOOD, "b.yaml": GOOD}, entry=None)
    error = await refused(alice, "nometa", csar=files.url("/no-meta.csar"))
    assert error["field"] == "spec.csar" and "TOSCA.meta" in error["reason"]
    files.documents["/missing.csar"] = archive({"app.yaml": GOOD}, entry="other.yaml")
    error = await refused(alice, "missing", csar=files.url("/missing.csar"))
    assert error["field"] == "spec.csar" and "other.yaml" in error["reason"]
    files.documents["/notzip.csar"] = b"not a zip archive"
    error = await refused(alice, "notzip", csar=files.url("/notzip.csar"))
    assert error["field"] == "spec.csar" and "zip" in error["reason"]
