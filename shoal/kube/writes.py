"""The kube controller's writes: its own status fields and its finalizer, as patches.

Only the controller's own status fields are written (docs/status-ownership.md), each
write recorded as the controller's (``written``), so that its echo wakes nothing; a
failure's reason and the next try follow the application's back-off settings.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

from shoal.client.informer import CacheKey, cache_key
from shoal.client.rest import ApiError, Unreachable
from shoal.copies.member import KubeFailure
from shoal.events import reasons
from shoal.kube.hub import Hub
from shoal.machinery.backoff import Backoff
from shoal.model.base import Reason, ReasonCode
from shoal.model.kubernetes import Application, ApplicationState

log = logging.getLogger(__name__)

MAX_BACKOFF = 60.0


async def set_finalizers(hub: Hub, app: Application, finalizers: list[str]) -> Application:
    """Write the finalizers alone (``metadata.modified`` stays), on our copy's revision."""
    meta = app.metadata
    item = {"namespace": meta.namespace, "name": meta.name, "finalizers": finalizers}
    version = await answered(hub,
        cache_key(app),
        hub.finalizer_writes.write({**item, "resource_version": meta.resource_version}),
    )
    metadata = meta.model_copy(update={"finalizers": finalizers, "resource_version": version})
    # the same as stored: its echo needs no decoding
    return hub.app_informer.known(app.model_copy(update={"metadata": metadata}))


async def write(hub: Hub, app: Application, fields: dict[str, Any]) -> Application:
    """Patch those of the controller's own status fields that differ (docs/status-ownership.md).

    No precondition: no other component writes these fields (the scheduler's
    and observer's writes meanwhile would only cost a 409 and a retry), and
    no decision is taken on a copy older than the controller's own last
    write (``reconcile`` waits for it).
    """
    status = app.status
    changed = {name: value for name, value in fields.items() if getattr(status, name) != value}
    if not changed:
        return app
    key = cache_key(app)
    item = {"namespace": key[0], "name": key[1], "status": changed}
    version = await answered(hub, key, hub.status_writes.write(item))
    # what the API stored, as far as the controller reads it back (state and reason,
    # derived by the API, come with the watch event)
    metadata = app.metadata.model_copy(update={"resource_version": version})
    written = app.model_copy(
        update={"metadata": metadata, "status": status.model_copy(update=changed)}
    )
    if written.status.pending_cleanups:  # copies left where they could not be removed
        hub.queue.add_after(key, hub.cleanup_retry)
    return written


async def answered(hub: Hub, key: CacheKey, write: Awaitable[int]) -> int:
    """The revision one of our writes of ``key`` made, recorded as ours (``written``).

    Its event may come before its answer. The events of ``key`` meanwhile are held
    (``early``) until the answer says which one was its echo: the others queue a
    reconcile, as does any of them when the write failed.
    """
    if key in hub.early:  # another write of it is in flight: that one decides
        return await write
    early = hub.early[key] = []
    try:
        version = await write
    except BaseException:
        if hub.early.pop(key, None):
            hub.queue.add(key)
        raise
    hub.early.pop(key, None)
    hub.written[key] = max(hub.written.get(key, 0), version)
    if any(revision != version for revision in early):
        hub.queue.add(key)
    return version


async def failed(hub: Hub, app: Application, failure: KubeFailure) -> None:
    """Record the reason and retry with the application's backoff settings."""
    key = cache_key(app)
    attempts = hub.failures.get(key, 0) + 1
    hub.failures[key] = attempts
    spec = app.spec
    log.info(
        "application %s/%s: %s (attempt %d): %s",
        key[0],
        key[1],
        failure.code.name,
        attempts,
        failure,
    )
    limit = spec.backoff_limit
    give_up = limit >= 0 and attempts > limit and app.metadata.deleted is None
    reasons.deploy_failed(hub.events, app, failure.code.name, str(failure), attempts, limit)
    delay: float = spec.backoff_delay * (spec.backoff ** (attempts - 1) if spec.backoff else 1)
    message = str(failure)
    if failure.code is ReasonCode.CONFLICT:
        # Someone else's object will not go away by itself within a second: wait longer
        # each time, and say when the next try is (``retry`` tries at once).
        delay = Backoff(max(float(spec.backoff_delay), 1.0), MAX_BACKOFF).delay(attempts)
        message += (
            f" (attempt {attempts}; next in {delay:g} s, or at once with "
            f"'shoal kube app retry {app.metadata.name}')"
        )
    fields: dict[str, Any] = {
        "deploy_reason": Reason(code=failure.code, message=message[:1000]),
        "retries": attempts,
    }
    if give_up:
        fields["deploy_state"] = ApplicationState.FAILED
    with contextlib.suppress(ApiError, Unreachable):
        await write(hub, app, fields)
        if give_up:
            hub.failures.pop(key, None)  # a retry (state PENDING) starts afresh
    if give_up:
        return
    hub.queue.add_after(key, min(max(float(delay), 0.1), MAX_BACKOFF))

