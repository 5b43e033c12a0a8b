"""A RescheduleTask acts only on applications its requester may update; the rest are Forbidden."""

from __future__ import annotations

import asyncio
import contextlib

from shoal.client.rest import ShoalClient
from shoal.reschedule.controller import RescheduleTaskController
from tests.security.conftest import TOKENS, Secured, application, eventually, grant, role


async def test_task_acts_for_its_requester(secured: Secured) -> None:
    admin, alice = secured["admin"], secured["alice"]
    await grant(admin, "alice", role("task-writer", "scheduling", ("rescheduletasks",), ()))
    for user, ns in ((alice, "a"), (secured["bob"], "b")):
        created = await user.post(
            f"/kubernetes/namespaces/{ns}/applications", json=application(f"app-{ns}", ns)
        )
        assert created.status_code == 200
    task = {
        "api": "scheduling",
        "kind": "RescheduleTask",
        "metadata": {"name": "both"},
        "spec": {
            "target_ref_policy": [{"namespace": ns, "label_selector": ""} for ns in ("a", "b")],
            # a requester named by the client is replaced by the one who asked
            "requested_by": {"user": "admin", "groups": ["shoal:admins"]},
        },
    }

    async def may_create() -> bool:
        return (await alice.post("/scheduling/rescheduletasks", json=task)).status_code == 200

    await eventually(may_create)
    stored = (await alice.get("/scheduling/rescheduletasks/both")).json()
    assert stored["spec"]["requested_by"] == {"user": "alice", "groups": []}
    stored["spec"]["requested_by"] = {"user": "admin", "groups": ["shoal:admins"]}
    assert (await alice.put("/scheduling/rescheduletasks/both", json=stored)).status_code == 200
    kept = (await admin.get("/scheduling/rescheduletasks/both")).json()
    assert kept["spec"]["requested_by"]["user"] == "alice"  # the API keeps it

    token = TOKENS["system:reschedule-controller"]
    async with ShoalClient(secured.server.url, token=token) as client:
        controller = RescheduleTaskController(client)
        running = asyncio.create_task(controller.run())
        try:

            async def stamped() -> bool:
                counts = (await admin.get("/scheduling/rescheduletasks/both")).json()["status"]
                return counts["failed"] == 1 and (
                    (await admin.get("/kubernetes/namespaces/a/applications/app-a"))
                    .json()["status"]
                    .get("reschedule_requested")
                    is not None
                )

            await eventually(stamped, 15)
            # The stamp's commit carries app-a's event, naming the task and its requester.
            told = (await admin.get("/core/namespaces/a/events")).json()["items"]
            assert [e["message"] for e in told if e["reason"] == "RescheduleRequested"] == [
                "Reschedule requested by RescheduleTask both (for alice), now on nowhere"
            ]
            assert not (await admin.get("/core/namespaces/b/events")).json()["items"]
            # Progress is written as counts; every target's result when the task finishes.
            # Without a scheduler app-a never moves: deleting it gives it a result too.
            deleted = await alice.delete("/kubernetes/namespaces/a/applications/app-a")
            assert deleted.status_code == 200

            async def finished() -> bool:
                status = (await admin.get("/scheduling/rescheduletasks/both")).json()["status"]
                return bool(status["phase"] == "Finished")

            await eventually(finished, 15)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running
    targets = (await admin.get("/scheduling/rescheduletasks/both")).json()["status"]["targets"]
    by_ns = {t["namespace"]: t for t in targets}
    assert by_ns["b"]["reason"] == "Forbidden"
    assert by_ns["a"]["reason"] in ("ApplicationNotFound", "ApplicationDeleting")
    app_b = (await admin.get("/kubernetes/namespaces/b/applications/app-b")).json()
    assert app_b["status"].get("reschedule_requested") is None  # not touched
