"""10,000 mutated bodies against a real server over one keep-alive connection
(``bench/fuzz.py``): no 5xx, no dropped connection."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.samples import BY_KIND

ROOT = Path(__file__).resolve().parents[2]


# A fixed amount of work in a child process: about 60 s on a quiet machine, five times
# that on a loaded one; the bound only catches a hang.
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_ten_thousand_mutated_bodies() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bench" / "fuzz.py"), "--bodies", "10000", "--seed", "1",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode == 0, out.decode()[-3000:]
    assert "connections used: 1" in out.decode()


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("apps/v1", "D" * 300), ("../../..", "Deployment"), ("apps/v1", "../../x"),
     ("a" * 300 + "/v1", "Deployment")],
)  # fmt: skip
async def test_a_kind_or_api_version_names_no_file(
    http: httpx.AsyncClient, api_version: str, kind: str
) -> None:
    """Manifest schemas are looked up by kind and apiVersion: text no Kubernetes kind can
    have is no file name (no 500, no path outside the schemas)."""
    body = BY_KIND["Application"].body("x", "default")
    body["spec"]["manifest"][0].update({"apiVersion": api_version, "kind": kind})
    answer = await http.post("/kubernetes/namespaces/default/applications", json=body)
    assert answer.status_code < 500, answer.text
