"""Informer: list-then-watch cache; resumes after an API restart, re-lists after compaction."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shoal.api.resources import Resources
from shoal.api.server import ApiServer, start_api
from shoal.client.informer import Informer, running
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from shoal.store.sqlite import SqliteStore
from shoal.testing import shipped
from tests.api.samples import APPLICATION
from tests.util import free_port, wait_for


def application(name: str, namespace: str = "default") -> Application:
    return Application.model_validate(APPLICATION.body(name, namespace))


class Recorder:
    """Handler calls, in order, as (what, name, resource_version)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int | None]] = []

    def add(self, obj: Application) -> None:
        self.calls.append(("add", obj.metadata.name, obj.metadata.resource_version))

    async def update(self, old: Application, new: Application) -> None:
        assert old.metadata.name == new.metadata.name
        self.calls.append(("update", new.metadata.name, new.metadata.resource_version))

    def delete(self, obj: Application) -> None:
        self.calls.append(("delete", obj.metadata.name, obj.metadata.resource_version))

    def of(self, what: str) -> list[str]:
        return sorted(name for w, name, _ in self.calls if w == what)

    def informer(self, client: ShoalClient, namespace: str | None = None) -> Informer[Application]:
        return Informer(
            client,
            Application,
            namespace,
            on_add=self.add,
            on_update=self.update,
            on_delete=self.delete,
            heartbeat=1.0,
            retry_delay=0.05,
        )


class Restartable:
    """An API server on a file store and a fixed port that can be stopped and started again."""

    def __init__(self, path: Path) -> None:
        self.store = SqliteStore(str(path))
        self.port = free_port()
        self.server: ApiServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.server = await start_api(self.store, port=self.port, security=shipped.security())

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None


@pytest.fixture
async def restartable(tmp_path: Path) -> AsyncIterator[Restartable]:
    server = Restartable(tmp_path / "shoal.db")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await server.store.close()


async def test_initial_list_then_events_once_each(client: ShoalClient) -> None:
    for name in ("a", "b", "c"):
        await client.create(application(name))
    await client.create(application("other", "elsewhere"))
    recorder = Recorder()
    informer = recorder.informer(client, "default")
    async with running(informer):
        assert recorder.calls and recorder.of("add") == ["a", "b", "c"]
        assert sorted(o.metadata.name for o in informer.items()) == ["a", "b", "c"]
        a = await client.get(Application, "a", "default")
        a.spec.backoff = 4
        await client.update(a)
        await client.delete(Application, "b", "default")
        await client.create(application("d"))
        await wait_for(lambda: len(recorder.calls) >= 6)
        await asyncio.sleep(0.3)
        assert recorder.calls[3:] == [
            ("update", "a", recorder.calls[3][2]),
            ("delete", "b", recorder.calls[4][2]),
            ("add", "d", recorder.calls[5][2]),
        ]
        assert informer.get("a", "default").spec.backoff == 4  # type: ignore[union-attr]
        assert informer.get("b", "default") is None
        assert informer.lists == 1


async def test_one_cache_serves_two_sets_of_handlers(client: ShoalClient) -> None:
    """``also``: a second part of a process follows the same cache, and sees every change,
    the listing included; one handler's failure does not keep the change from the other."""
    await client.create(application("a"))
    first, second = Recorder(), Recorder()
    informer = first.informer(client, "default")

    def failing(obj: Application) -> None:
        first.add(obj)
        raise RuntimeError("a handler that fails")

    informer.on_add = failing
    informer.also(on_add=second.add, on_update=second.update, on_delete=second.delete)
    async with running(informer):
        await client.create(application("b"))
        a = await client.get(Application, "a", "default")
        a.spec.backoff = 4
        await client.update(a)
        await client.delete(Application, "b", "default")
        await wait_for(lambda: len(second.calls) >= 4)
        assert second.calls == first.calls
        assert [what for what, _, _ in second.calls] == ["add", "add", "update", "delete"]
        assert informer.lists == 1
        with pytest.raises(RuntimeError, match="after the first listing"):
            informer.also(on_add=second.add)


async def test_quiet_events_are_cached_undecoded_and_call_no_handler(client: ShoalClient) -> None:
    recorder = Recorder()
    informer = recorder.informer(client)
    informer.quiet = lambda raw: raw["spec"].get("backoff") == 7
    async with running(informer):
        await client.create(application("loud"))
        quiet = application("quiet")
        quiet.spec.backoff = 7
        created = await client.create(quiet)
        await wait_for(lambda: informer.revision >= (created.metadata.resource_version or 0))
        assert recorder.calls == [("add", "loud", recorder.calls[0][2])]
        built = informer.get("quiet", "default")  # decoded when read
        assert built is not None and built.spec.backoff == 7
        created.spec.backoff = 3
        await client.update(created)  # an update of a quiet object compares with its model
        await wait_for(lambda: len(recorder.calls) == 2)
        assert recorder.calls[1][:2] == ("update", "quiet")
        unseen = application("unseen")
        unseen.spec.backoff = 7
        unseen = await client.create(unseen)
        unseen.spec.backoff = 2
        await client.update(unseen)  # never decoded: new to the handlers
        await wait_for(lambda: len(recorder.calls) == 3)
        assert recorder.calls[2][:2] == ("add", "unseen")
        default = application("x").spec.backoff
        assert sorted(o.spec.backoff for o in informer.items()) == sorted([2, 3, default])


async def test_an_update_that_leaves_what_handlers_read_is_quiet(client: ShoalClient) -> None:
    """``reads``: handlers read only ``spec.backoff`` here, so a label change is not theirs."""
    recorder = Recorder()
    informer = recorder.informer(client)
    informer.reads = lambda raw: raw["spec"].get("backoff")
    async with running(informer):
        app = await client.create(application("a"))
        await wait_for(lambda: len(recorder.calls) == 1)
        app.metadata.labels = {"seen": "no"}
        app = await client.update(app)
        await wait_for(lambda: informer.revision >= (app.metadata.resource_version or 0))
        assert [c[0] for c in recorder.calls] == ["add"]
        cached = informer.get("a", "default")  # the quiet update, decoded when read
        assert cached is not None and cached.metadata.labels == {"seen": "no"}
        app.spec.backoff = 9
        app = await client.update(app)
        await wait_for(lambda: len(recorder.calls) == 2)
        assert recorder.calls[1] == ("update", "a", app.metadata.resource_version)
        await client.delete(Application, "a", "default")
        again = await client.create(application("a"))  # what it reads, as the first time
        await wait_for(lambda: len(recorder.calls) == 4)
        assert [c[0] for c in recorder.calls[2:]] == ["delete", "add"]
        assert recorder.calls[3][2] == again.metadata.resource_version


async def test_keep_trims_what_is_built_from_events(client: ShoalClient) -> None:
    """``keep``: an event's object is built from what the process reads (here its labels
    are dropped), whether it reaches the handlers or waits undecoded until read."""
    recorder = Recorder()
    informer = recorder.informer(client)
    informer.quiet = lambda raw: raw["spec"].get("backoff") == 7

    def keep(raw: dict[str, Any]) -> dict[str, Any]:
        raw["metadata"]["labels"] = {}
        return raw

    informer.keep = keep
    async with running(informer):
        for name, backoff in (("loud", 1), ("quiet", 7)):
            app = application(name)
            app.metadata.labels = {"big": "yes"}
            app.spec.backoff = backoff
            created = await client.create(app)
        await wait_for(lambda: informer.revision >= (created.metadata.resource_version or 0))
        assert [c[:2] for c in recorder.calls] == [("add", "loud")]
        for name in ("loud", "quiet"):
            cached = informer.get(name, "default")
            assert cached is not None and cached.metadata.labels == {}, name
        stored = await client.get(Application, "quiet", "default")
        assert stored.metadata.labels == {"big": "yes"}  # the store keeps everything


async def test_two_phase_delete_is_an_update_then_a_delete(client: ShoalClient) -> None:
    app = application("a")
    app.metadata.finalizers = ["shoal/kube"]
    await client.create(app)
    recorder = Recorder()
    informer = recorder.informer(client)
    async with running(informer):
        deleting = await client.delete(Application, "a", "default")
        await wait_for(lambda: len(recorder.calls) >= 2)
        deleting.metadata.finalizers = []
        await client.update(deleting)
        await wait_for(lambda: len(recorder.calls) >= 3)
        await asyncio.sleep(0.2)
        assert [c[0] for c in recorder.calls] == ["add", "update", "delete"]
        assert informer.items() == []


async def test_resumes_after_api_restart_without_loss_or_duplicates(
    restartable: Restartable,
) -> None:
    async with shipped.client(restartable.url, timeout=5) as client:
        for i in range(5):
            await client.create(application(f"before-{i}"))
        recorder = Recorder()
        informer = recorder.informer(client)
        async with running(informer):
            await client.create(application("live"))
            await wait_for(lambda: len(recorder.calls) >= 6)
            await restartable.stop()
            # changes while the API is down, made on the same store
            resources = Resources(restartable.store)
            for i in range(5):
                await resources.create(Application, application(f"down-{i}"), "default")
            await resources.delete(Application, "before-0", "default")
            await asyncio.sleep(0.3)  # the informer retries against a closed port
            await restartable.start()
            for i in range(5):
                await client.create(application(f"after-{i}"))
            await wait_for(lambda: len(recorder.calls) >= 17, message="17 handler calls")
            await asyncio.sleep(0.5)
            assert recorder.of("add") == sorted(
                [f"before-{i}" for i in range(5)]
                + ["live"]
                + [f"down-{i}" for i in range(5)]
                + [f"after-{i}" for i in range(5)]
            )
            assert recorder.of("delete") == ["before-0"]
            assert recorder.of("update") == []
            assert informer.lists == 1  # resumed, not re-listed
            revisions = [rv for _, _, rv in recorder.calls[5:]]
            assert revisions == sorted(revisions)


async def test_relists_after_compaction_and_reports_missed_changes_once(
    restartable: Restartable,
) -> None:
    async with shipped.client(restartable.url, timeout=5) as client:
        for name in ("keep", "change", "drop"):
            await client.create(application(name))
        recorder = Recorder()
        informer = recorder.informer(client)
        async with running(informer):
            await restartable.stop()
            resources = Resources(restartable.store)
            change = await resources.get(Application, "change", "default")
            change.spec.backoff = 9
            await resources.update(Application, change, "change", "default")
            await resources.delete(Application, "drop", "default")
            await resources.create(Application, application("new"), "default")
            # a change made and undone while away: created and deleted, never seen
            await resources.create(Application, application("ghost"), "default")
            await resources.delete(Application, "ghost", "default")
            await restartable.store.compact(await restartable.store.revision())
            await restartable.start()
            await wait_for(lambda: informer.lists >= 2, message="a second list")
            await wait_for(lambda: len(recorder.calls) >= 6)
            await asyncio.sleep(0.5)
            assert recorder.calls[:3] == [
                ("add", n, recorder.calls[i][2]) for i, n in enumerate(("change", "drop", "keep"))
            ]
            missed = sorted((w, n) for w, n, _ in recorder.calls[3:])
            assert missed == [("add", "new"), ("delete", "drop"), ("update", "change")]
            assert informer.get("change", "default").spec.backoff == 9  # type: ignore[union-attr]
            assert informer.lists == 2
            # and the watch goes on from the new list
            await client.create(application("later"))
            await wait_for(lambda: ("add", "later") in [(w, n) for w, n, _ in recorder.calls])
            assert len(recorder.calls) == 7


async def test_informer_stops_cleanly(client: ShoalClient) -> None:
    informer = Recorder().informer(client)
    task = asyncio.create_task(informer.run())
    await informer.wait_synced(5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.cancelled()
