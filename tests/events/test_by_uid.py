"""An object's events are those of its uid: one created again under a deleted one's name
starts with no history (``shoal get events --for``, ``describe``), as alice under security."""

from __future__ import annotations

import pytest

from shoal.client.rest import ShoalClient
from shoal.events import Recorder
from shoal.model.events import UID_LABEL
from shoal.model.kubernetes import Application
from shoal.testing import builders
from tests.cli.conftest import invoke, ok
from tests.security.conftest import TOKENS, Secured, secured  # noqa: F401  (the secured API)
from tests.util import until_gone


async def _create_web(alice: ShoalClient) -> Application:
    app = builders.app("web")
    app.metadata.namespace = "a"
    return await alice.create(app)


async def test_a_recreated_application_has_its_own_events(
    secured: Secured, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    url = secured.server.url
    monkeypatch.setenv("SHOAL_TOKEN", TOKENS["alice"])
    async with (
        ShoalClient(url, token=TOKENS["alice"]) as alice,
        ShoalClient(url, token=TOKENS["admin"]) as admin,
    ):
        recorder = Recorder(admin, "scheduler")  # a component writes the events
        old = await _create_web(alice)
        recorder.emit(old, "Unschedulable", "No cluster fits the old web", type="Warning")
        await recorder.flush()
        await alice.delete(Application, "web", "a")
        await web_gone(alice)
        new = await _create_web(alice)
        assert new.metadata.uid != old.metadata.uid
        recorder.emit(new, "Scheduled", "Scheduled the new web")
        await recorder.flush()

        events = (await secured["alice"].get("/core/namespaces/a/events")).json()["items"]
        labels = {e["reason"]: e["metadata"]["labels"].get(UID_LABEL) for e in events}
        assert labels == {"Unschedulable": old.metadata.uid, "Scheduled": new.metadata.uid}

        listed = ok(await invoke("--api", url, "get", "events", "-n", "a", "--for", "app/web"))
        assert "Scheduled the new web" in listed.stdout
        assert "old web" not in listed.stdout, listed.stdout
        page = ok(await invoke("--api", url, "describe", "app", "web", "-n", "a")).stdout
        assert "Scheduled the new web" in page and "old web" not in page, page

        await alice.delete(Application, "web", "a")
        await web_gone(alice)
        # no application of that name now: every one that had it
        history = ok(await invoke("--api", url, "get", "events", "-n", "a", "--for", "app/web"))
        assert "old web" in history.stdout and "new web" in history.stdout, history.stdout


async def web_gone(client: ShoalClient) -> None:
    """Until ``web`` of namespace a is gone (its finalizers done)."""

    await until_gone(client, Application, "web", "a")
