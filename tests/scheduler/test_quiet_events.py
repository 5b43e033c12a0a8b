"""The scheduler leaves undecoded only the application updates its handlers would ignore.

Its informer skips an update whose ``reads`` equals the last one's. For any two
states of an application, equal ``reads`` must mean that the update handler
neither queues the application nor changes the cluster indexes: else an
update that matters would be skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Reason, ReasonCode, ResourceRef
from shoal.model.kubernetes import Application, ApplicationState
from shoal.scheduler import watched
from shoal.scheduler.scheduler import Scheduler
from tests.scheduler import helpers as h
from tests.util import wait_for

T1, T2 = datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC)
CLUSTERS = [None, *(ResourceRef(api="kubernetes", kind="Cluster", namespace=h.NS, name=n)
                    for n in ("a", "b"))]  # fmt: skip
WHEN = st.sampled_from([None, T1, T2])


def _ref(where: ResourceRef | None) -> dict[str, Any] | None:
    return None if where is None else where.model_dump(mode="json")


STATES = st.fixed_dictionaries(
    {
        "modified": st.sampled_from([T1, T2]),
        "deleted": WHEN,
        "finalizers": st.sampled_from([[], ["shoal.kube/resources"]]),
        "state": st.sampled_from(list(ApplicationState)),
        "reason": st.sampled_from([None, Reason(code=ReasonCode.NO_SUITABLE_RESOURCE)]),
        "scheduled_to": st.sampled_from(CLUSTERS),
        "running_on": st.sampled_from(CLUSTERS),
        "placements": st.sampled_from([[], [{"cluster": _ref(CLUSTERS[1]), "replicas": 1},
                                            {"cluster": _ref(CLUSTERS[2]), "replicas": 2}]]),
        "copies": st.sampled_from([[], [{"cluster": _ref(CLUSTERS[2]), "ready_replicas": 1}]]),
        "pending_cleanups": st.sampled_from([[], [{"cluster": _ref(CLUSTERS[1]), "objects": []}]]),
        "reschedule_requested": WHEN,
        "spec_modified": st.sampled_from([None, T1.isoformat(), T2.isoformat()]),
        "kube_controller_triggered": WHEN,
        "complete_token": st.sampled_from([None, "t"]),
    }
)  # fmt: skip


def application(state: dict[str, Any]) -> Application:
    app = h.app("web")
    app.metadata.modified = state["modified"]
    app.metadata.deleted = state["deleted"]
    app.metadata.finalizers = state["finalizers"]
    status = app.status.model_dump()
    status.update({k: state[k] for k in (
        "state", "reason", "scheduled_to", "running_on", "placements", "copies",
        "pending_cleanups", "reschedule_requested", "kube_controller_triggered",
        "complete_token")})  # fmt: skip
    status["scheduling"] = {"spec_modified": state["spec_modified"]}
    app.status = type(app.status).model_validate(status)
    return app


def _indexes(scheduler: Scheduler) -> Any:
    return [
        {k: set(v) for k, v in index.items() if v}
        for index in (scheduler.placed.on_cluster, scheduler.placed.bound_to,
                      scheduler.placed.copies_on, scheduler.placed.copies_of)
    ]  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_equal_reads_mean_the_update_handler_does_nothing(data: st.DataObject) -> None:
    before, other = data.draw(STATES), data.draw(STATES)
    changed = data.draw(st.sets(st.sampled_from(sorted(before)), min_size=1, max_size=2))
    after = {**before, **{field: other[field] for field in changed}}  # an update: a few fields
    old, new = application(before), application(after)
    quiet = watched.reads(old.model_dump(mode="json")) == watched.reads(
        new.model_dump(mode="json")
    )
    scheduler = Scheduler(ShoalClient("http://127.0.0.1:9"))
    queued: list[Any] = []
    scheduler.queue.add = queued.append  # type: ignore[method-assign]
    scheduler.placed.update(old)
    indexes = _indexes(scheduler)
    scheduler._app_updated(old, new)
    if quiet:
        assert queued == []
        assert _indexes(scheduler) == indexes


def test_a_finalizer_or_a_hook_token_is_quiet_and_a_binding_is_not() -> None:
    app = application({"modified": T1, "deleted": None, "finalizers": [],
                       "state": ApplicationState.PENDING, "reason": None, "scheduled_to": None,
                       "running_on": None, "placements": [], "copies": [],
                       "pending_cleanups": [], "reschedule_requested": None,
                       "spec_modified": None, "kube_controller_triggered": None,
                       "complete_token": None})  # fmt: skip
    first = watched.reads(app.model_dump(mode="json"))
    app.metadata.finalizers = ["shoal.kube/resources"]
    app.status.complete_token = "t"
    assert watched.reads(app.model_dump(mode="json")) == first
    app.status.scheduled_to = CLUSTERS[1]
    assert watched.reads(app.model_dump(mode="json")) != first


def test_the_scheduler_keeps_every_key_of_the_explanation_it_reads() -> None:
    """Its cache drops the rest of ``status.scheduling``: a key read from it anywhere in the
    scheduler and missing from ``SCHEDULING_READ`` would always read as absent."""
    import re
    from pathlib import Path

    package = Path(watched.__file__).parent
    read = {
        key
        for path in package.glob("*.py")
        for key in re.findall(r'\.scheduling or \{\}\)\.get\("(\w+)"\)', path.read_text())
    }
    assert read, "the pattern no longer finds the scheduler's reads: update this test"
    assert read <= set(watched.SCHEDULING_READ), read - set(watched.SCHEDULING_READ)
    explanation = {"summary": "s", "spec_modified": "t", "ranking": [{"cluster": "a"}] * 25}
    raw = application({"modified": T1, "deleted": None, "finalizers": [],
                       "state": ApplicationState.PENDING, "reason": None, "scheduled_to": None,
                       "running_on": None, "placements": [], "copies": [],
                       "pending_cleanups": [], "reschedule_requested": None,
                       "spec_modified": None, "kube_controller_triggered": None,
                       "complete_token": None}).model_dump(mode="json")  # fmt: skip
    raw["status"]["scheduling"] = explanation
    assert watched.kept(raw)["status"]["scheduling"] == {"summary": "s", "spec_modified": "t"}


async def test_the_scheduler_caches_the_explanation_it_reads_only(
    api: ApiServer, client: ShoalClient
) -> None:
    await h.register(client, h.cluster("a"))
    async with h.running(api.url, h.fast_config()) as scheduler:
        await client.create(h.app("web"))
        assert await h.wait_bound(client, "web") == "a"
        stored = (await h.get_app(client, "web")).status.scheduling or {}
        assert {"ranking", "summary", "spec_modified"} <= set(stored)

        def cached() -> dict[str, Any] | None:
            app = scheduler.app_informer.get("web", h.NS)
            return app.status.scheduling if app and app.status.scheduled_to else None

        kept = await wait_for(cached, timeout=5, message="the binding in the cache")
        assert kept == {k: stored[k] for k in watched.SCHEDULING_READ if k in stored}
