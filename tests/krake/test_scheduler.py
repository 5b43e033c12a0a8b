"""``shoal scheduler --flavour krake``: Shoal's scheduler drives a real Krake 1.0.1 API server.

Krake's API (on etcd) holds clusters in two locations and applications with
label constraints; Shoal's scheduler, as a process of its own, binds each to
a cluster of its location, through Krake's binding subresource, as Krake's
own scheduler would. An application no cluster fits is retried with a growing
delay, then FAILED, as on Shoal's own API.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.testing.builders import KUBECONFIG
from shoal.testing.launch import spawn_shoal, stop
from shoal.testing.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]

NS = "krake"
COUNT = int(os.environ.get("SHOAL_KRAKE_APPS", "100"))


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_shoal_scheduler_binds_applications_on_a_krake_api(
    krake_api: str, tmp_path: Path
) -> None:
    clusters = f"/kubernetes/namespaces/{NS}/clusters"
    apps = f"/kubernetes/namespaces/{NS}/applications"
    async with httpx.AsyncClient(base_url=krake_api, timeout=30) as http:
        for name, location in (("de-1", "DE"), ("de-2", "DE"), ("fr-1", "FR")):
            body = {
                "metadata": {"name": name, "labels": {"location": location}},
                "spec": {"kubeconfig": KUBECONFIG, "constraints": {"cloud": {}}},
            }
            cluster = _ok(await http.post(clusters, json=body))
            cluster["status"]["state"] = "ONLINE"  # as Krake's cluster controller reports it
            _ok(await http.put(f"{clusters}/{name}/status", json=cluster))
        expected: dict[str, str] = {}
        for i in range(COUNT):
            location = ("DE", "FR")[i % 2]
            expected[f"app-{i:03d}"] = location.lower()
            manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]
            body = {
                "metadata": {"name": f"app-{i:03d}"},
                "spec": {
                    "manifest": manifest,
                    "constraints": {"cluster": {"labels": [f"location is {location}"]}},
                },
            }
            _ok(await http.post(apps, json=body))
        nowhere = {
            "metadata": {"name": "nowhere"},
            "spec": {
                "manifest": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
                "constraints": {"cluster": {"labels": ["location is JP"]}},
            },
        }
        _ok(await http.post(apps, json=nowhere))

        log = tmp_path / "scheduler.log"
        started = time.monotonic()
        config = tmp_path / "scheduler.yaml"
        config.write_text("scheduler: {retries: 5}\n")  # unlimited by default, as Krake
        args = ("--api", krake_api, "--flavour", "krake", "--config", str(config))
        proc = spawn_shoal("scheduler", *args, log=log)
        try:

            async def placed() -> bool:
                items = _ok(await http.get(apps))["items"]
                where = {
                    app["metadata"]["name"]: (app["status"]["scheduled_to"] or {}).get("name", "")
                    for app in items
                }
                assert proc.poll() is None, log.read_text()[-3000:]
                return all(where[name].startswith(loc) for name, loc in expected.items())

            await wait_for(placed, timeout=60 + COUNT / 2, interval=0.5, message="bindings")
            stuck = _ok(await http.get(f"{apps}/nowhere"))["status"]
            assert stuck["scheduled_to"] is None
            # retry with delay (1, 2, 4, 8 s), then FAILED, as against Shoal's API
            failed = await wait_for(
                lambda: _failed(http, f"{apps}/nowhere"), timeout=90, message="FAILED"
            )
            assert failed["reason"]["code"] == "NO_SUITABLE_RESOURCE"
            assert time.monotonic() - started >= 10
        finally:
            stop(proc)


async def _failed(http: httpx.AsyncClient, path: str) -> dict[str, Any] | None:
    status: dict[str, Any] = _ok(await http.get(path))["status"]
    return status if status["state"] == "FAILED" else None
