"""``shoal kube app retry``, a stale ``explain`` and ``describe``, ``cluster delete --force``."""

from __future__ import annotations

import json
from pathlib import Path

from shoal.client.rest import NotFound, ShoalClient
from shoal.model.base import ReasonCode
from shoal.model.kubernetes import Application, Cluster
from tests.cli.conftest import Shoal
from tests.scheduler import helpers as h
from tests.util import wait_for

MANIFEST = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"


async def test_retry_stale_explain_and_force_delete(
    shoal: Shoal, client: ShoalClient, tmp_path: Path
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    await h.register(client, h.cluster("de-1", labels={"location": "DE"}))
    async with h.running(client.url, h.fast_config(backoff={"initial": 30, "cap": 60})):
        for name, where in (("web", "FR"), ("db", "DE")):
            args = ("-f", str(manifest), "-L", f"location is {where}", "--retry-delay", "60")
            created = await shoal("kube", "app", "create", name, *args)
            assert created.exit_code == 0, created.output

        async def attempts(name: str, count: int) -> Application | None:
            app = await client.get(Application, name, h.NS)
            return app if app.status.scheduler_attempts == count else None

        waiting = await wait_for(lambda: attempts("web", 1), message="web waiting")
        assert waiting.spec.retry_delay == 60
        retried = await shoal("kube", "app", "retry", "web")
        assert retried.exit_code == 0, retried.output
        assert "retrying (PENDING)" in retried.output
        await wait_for(lambda: attempts("web", 1), message="web tried again at once")
        again = await client.get(Application, "web", h.NS)
        scheduling = again.status.scheduling or {}
        assert scheduling["time"] > (waiting.status.scheduling or {})["time"]

        await h.wait_bound(client, "db", "de-1")
        fresh = json.loads((await shoal("kube", "app", "explain", "db", "-o", "json")).output)
        assert fresh["stale"] == []
        cluster = await client.get(Cluster, "de-1", h.NS)
        cluster.metadata.labels["tier"] = "gold"  # an input of db's decision; it still fits
        await client.update(cluster)
        stale = json.loads((await shoal("kube", "app", "explain", "db", "-o", "json")).output)
        assert len(stale["stale"]) == 1 and "de-1 changed: labels" in stale["stale"][0]
        table = await shoal("kube", "app", "explain", "db")
        assert "stale" in table.output and "decided at" in table.output
        page = (await shoal("kube", "app", "describe", "db")).output
        assert "Decided" in page and "de-1 changed: labels" in page, page

        deleted = await shoal("kube", "cluster", "delete", "de-1", "--force")
        assert deleted.exit_code == 0, deleted.output
        try:
            await client.get(Cluster, "de-1", h.NS)
            raise AssertionError("de-1 still there after --force")
        except NotFound:
            pass

        async def unbound() -> Application | None:
            app = await client.get(Application, "db", h.NS)
            reason = app.status.reason
            gone = reason is not None and reason.code is ReasonCode.CLUSTER_DELETED
            return app if gone and app.status.scheduled_to is None else None

        db = await wait_for(unbound, timeout=3, message="db CLUSTER_DELETED")
        assert db.status.last_scheduled_to is not None
        assert db.status.last_scheduled_to.name == "de-1"
