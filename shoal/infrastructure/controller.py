"""The infrastructure controller: builds, changes and deletes clusters bound to a cloud.

The scheduler binds a Cluster without a kubeconfig to a Cloud or GlobalCloud
(``status.scheduled_to``). This controller has that cloud's
InfrastructureProvider build it, and follows Krake's cluster states:

- ``PENDING`` → ``CREATING`` (the provider builds it) → ``CONNECTING`` (its
  kubeconfig is in ``spec.kubeconfig``; the cluster observer takes over and says
  ``ONLINE``);
- a new ``spec.tosca`` → ``RECONCILING`` (changed in place) → ``CONNECTING``;
- ``FAILED`` with the reason when the provider refuses, fails or does not answer,
  tried again after 2, 4, 8 … seconds, up to ``retry_cap``. Nothing but a change
  the user makes brings a retry forward: a new ``spec.tosca`` (never nearer than
  ``retry_delay`` to the last try), or the cluster's deletion. Events, resyncs
  and the echo of the controller's own writes wait for the retry's time. A retry
  keeps the cluster FAILED until the provider accepts the call;
- on deletion, once every other finalizer is gone (the scheduler's eviction has
  moved the cluster's applications away), ``DELETING``; the finalizer
  ``infrastructure_resources_deletion`` goes when the provider no longer knows
  the infrastructure, at once when no id was recorded and the provider finds
  none under the cluster's key (a cluster that FAILED before anything was made).

Events: each step is a Normal event (``Creating``, ``Created``, ``Reconciling``,
``Reconciled``, ``Deleting``); a failure is one Warning ``InfrastructureFailed``
per cause (its reason code), counted, whose message is the latest attempt's.

Crash safety: the infrastructure is made under a key that names this cluster
for ever (``key``), and the controller asks the provider for it (``find``)
before making one. ``status.cluster_id`` records the provider's id before the
creation is confirmed. A controller killed at any step finds, on its next
pass, the infrastructure it made, or makes the one that is missing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from shoal.client.informer import CacheKey, Informer
from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.controllers.base import Controller
from shoal.events import reasons
from shoal.events.recorder import Recorder
from shoal.infrastructure.providers import (
    InfrastructureNotFound,
    InfrastructureState,
    Provider,
    ProviderError,
    fetch_template,
    resolve,
)
from shoal.infrastructure.registry import provider_for
from shoal.machinery.backoff import Backoff
from shoal.machinery.outbound import Sessions
from shoal.machinery.patch import merge_diff, merge_patch
from shoal.machinery.problems import ProblemError
from shoal.machinery.workqueue import WorkQueue
from shoal.model.base import Reason, ReasonCode
from shoal.model.infrastructure import Cloud, GlobalCloud
from shoal.model.kubernetes import BUILDING_STATES, Cluster, ClusterState
from shoal.model.tosca import allowed_url
from shoal.model.tosca import problems as template_problems

log = logging.getLogger(__name__)

NOT_HANDED_OVER = (BUILDING_STATES | {ClusterState.PENDING}) - {ClusterState.DELETING}
"""States in which a built cluster's kubeconfig is still this controller's to write."""

FINALIZER = "infrastructure_resources_deletion"
"""Krake's name: Krake's own infrastructure controller and this one hold the same."""
CLOUD_KINDS = frozenset({"Cloud", "GlobalCloud"})


def key(cluster: Cluster) -> str:
    """The name of the cluster's infrastructure at its provider: its name and its uid."""
    return f"{cluster.metadata.name}-{(cluster.metadata.uid or '')[:8]}"


def bound_to_cloud(cluster: Cluster) -> bool:
    bound = cluster.status.scheduled_to
    return bound is not None and bound.kind in CLOUD_KINDS


@dataclass(slots=True)
class _Failing:
    """A cluster whose last attempt failed: how often, on what, and when to try again."""

    attempts: int
    subject: Any  # what was tried: ("build", spec.tosca) or ("delete",)
    due: float  # monotonic time of the next attempt
    reason: Reason  # what the cluster shows until then
    tried: float  # monotonic time the last attempt failed


def _subject(cluster: Cluster) -> Any:
    """What the user asks of the cluster: a change of it retries a failure at once."""
    if cluster.metadata.deleted is not None:
        return ("delete",)
    return ("build", cluster.spec.tosca)


class InfrastructureController(Controller):
    def __init__(
        self,
        client: ShoalClient,
        *,
        poll: float = 2.0,
        timeout: float = 30.0,
        create_timeout: float = 900.0,
        retry_delay: float = 2.0,
        retry_cap: float = 300.0,
        workers: int = 8,
    ) -> None:
        super().__init__()
        self.client = client
        self.poll = poll  # seconds between two looks at an infrastructure being built
        self.timeout = timeout  # for one call to a provider
        self.create_timeout = create_timeout  # for a build, from create to configured
        # after a failure: retry_delay seconds, doubled at each failure, up to retry_cap
        self.backoff = Backoff(retry_delay, retry_cap)
        self.workers = workers
        self.informer: Informer[Cluster] = Informer(
            client, Cluster, on_change=self._changed, on_delete=self._removed
        )
        self.queue: WorkQueue[CacheKey] = WorkQueue()
        self.events = Recorder(client, "infrastructure-controller")
        self._sessions = Sessions(timeout=aiohttp.ClientTimeout(total=timeout))
        self._written: dict[CacheKey, Cluster] = {}
        self._failures: dict[CacheKey, _Failing] = {}
        self._building: dict[CacheKey, float] = {}  # monotonic start of a build being watched

    async def start(self) -> None:
        await self.start_informers(self.informer)
        self.spawn_workers(self.workers, self.queue, self.sync, self._retry)

    async def stop(self) -> None:
        await super().stop()
        await self.events.close()
        await self._sessions.close()

    # the cache ---------------------------------------------------------------------------

    def _changed(self, cluster: Cluster, old: Cluster | None) -> None:
        if bound_to_cloud(cluster) or FINALIZER in cluster.metadata.finalizers:
            self.queue.add((cluster.metadata.namespace, cluster.metadata.name))

    def _removed(self, cluster: Cluster) -> None:
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        self._written.pop(ref, None)
        self._failures.pop(ref, None)
        self._building.pop(ref, None)

    def _current(self, ref: CacheKey) -> Cluster | None:
        cached = self.informer.get(ref[1], ref[0])
        written = self._written.get(ref)
        if cached is None or written is None:
            return cached
        # our last write, if the cache has not seen it yet
        newer = (written.metadata.resource_version or 0) > (cached.metadata.resource_version or 0)
        return written if newer else cached

    # work --------------------------------------------------------------------------------

    def _retry(self, ref: CacheKey, error: Exception) -> None:
        if isinstance(error, Conflict | NotFound):
            self.queue.add_after(ref, 0.05)
        elif isinstance(error, ApiError | Unreachable):
            log.warning("cluster %s/%s: %s; retrying", *ref, error)
            self.queue.add_after(ref, 1.0)
        else:
            log.exception("cluster %s/%s failed; retrying", *ref)
            self.queue.add_after(ref, 5.0)

    async def sync(self, ref: CacheKey) -> None:
        cluster = self._current(ref)
        if cluster is None:
            return
        if cluster.metadata.deleted is not None:
            if FINALIZER in cluster.metadata.finalizers:
                await self._guarded(cluster, self._delete)
            return
        if not bound_to_cloud(cluster):
            return
        if FINALIZER not in cluster.metadata.finalizers:
            await self._set_finalizers(cluster, [*cluster.metadata.finalizers, FINALIZER])
            return  # the write comes back as an event
        await self._guarded(cluster, self._build)

    async def _guarded(self, cluster: Cluster, step: Any) -> None:
        """Run ``step`` unless a failure's retry is not due yet; a provider's failure makes
        the cluster FAILED and sets the next retry (2, 4 … ``retry_cap`` seconds)."""
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        subject = _subject(cluster)
        failing = self._failures.get(ref)
        if failing is not None and failing.subject != subject:
            if subject == ("delete",):
                del self._failures[ref]  # deleted: tried at once
                failing = None
            else:  # the user changed it: tried again from 2 s, but never nearer than
                # retry_delay to the last try (a template changed over and over is no flood)
                due = failing.tried + self.backoff.base
                failing = _Failing(0, subject, due, failing.reason, failing.tried)
                self._failures[ref] = failing
        if failing is not None:
            wait = failing.due - time.monotonic()
            if wait > 0:
                if cluster.status.state is not ClusterState.FAILED:
                    # the write of the failure did not happen (a conflict): it does now
                    await self._status(cluster, state=ClusterState.FAILED, reason=failing.reason)
                self.queue.add_after(ref, wait)
                return
        try:
            try:
                await step(cluster)
            except (ProviderError, ApiError, Unreachable):
                raise
            except Exception as error:  # a provider's answer it could not read: a failure too
                log.debug("cluster %s/%s", *ref, exc_info=True)
                deleting = subject == ("delete",)
                code = ReasonCode.DELETE_FAILED if deleting else ReasonCode.CREATE_FAILED
                text = f"the provider's answer could not be read: {type(error).__name__}: {error}"
                raise ProviderError(text, code) from error
        except ProviderError as error:
            attempts = (failing.attempts if failing is not None else 0) + 1
            delay = self.backoff.delay(attempts)
            message = f"{error.message} (attempt {attempts}; next in {delay:g} s)"
            reason = Reason(code=error.code, message=message[:1000])
            now = time.monotonic()
            self._failures[ref] = _Failing(attempts, subject, now + delay, reason, now)
            self.queue.add_after(ref, delay)
            log.warning("cluster %s/%s: %s", *ref, message)
            reasons.infrastructure_failed(self.events, cluster, error.code.name, message)
            await self._status(self._current(ref) or cluster, state=ClusterState.FAILED,
                               reason=reason)  # fmt: skip

    async def _provider(self, cluster: Cluster) -> Provider:
        """The client of the provider of the cloud the cluster is bound to."""
        bound = cluster.status.scheduled_to or cluster.status.running_on
        if bound is None or bound.kind not in CLOUD_KINDS:
            raise ProviderError("the cluster is bound to no cloud", ReasonCode.INVALID_RESOURCE)
        cloud: Any
        try:
            if bound.kind == "GlobalCloud":
                cloud = await self.client.get(GlobalCloud, bound.name)
            else:
                cloud = await self.client.get(Cloud, bound.name, bound.namespace)
        except NotFound as error:
            raise ProviderError(f"its {bound.kind} {bound.name} does not exist",
                                ReasonCode.INVALID_RESOURCE) from error  # fmt: skip
        provider = await resolve(self.client, cloud)
        return provider_for(provider, cloud, self._sessions)

    async def _template(self, cluster: Cluster) -> dict[str, Any]:
        """``spec.tosca``, read from its URL when it is one (and configuration allows)."""
        tosca = cluster.spec.tosca
        if isinstance(tosca, dict):
            return tosca
        if not allowed_url(tosca):
            raise ProviderError(f"reading {tosca} is not allowed here (SHOAL_TOSCA_URLS)",
                                ReasonCode.INVALID_TOSCA_MANIFEST)  # fmt: skip
        loaded = await fetch_template(self._sessions.of(tenant=True), tosca)
        await _check_fetched(tosca, loaded)
        return loaded

    # building ----------------------------------------------------------------------------

    async def _build(self, cluster: Cluster) -> None:
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        provider = await self._provider(cluster)
        status = cluster.status
        if not status.cluster_id:
            await self._create(cluster, provider)
            return
        infrastructure_id = status.cluster_id
        if not _is_applied(cluster):
            template = await self._template(cluster)
            if status.state not in (ClusterState.RECONCILING, ClusterState.FAILED):
                cluster = await self._status(cluster, state=ClusterState.RECONCILING, reason=None)
            await provider.reconcile(infrastructure_id, template)
            self._building[ref] = time.monotonic()
            await self._status(cluster, state=ClusterState.RECONCILING, reason=None,
                               last_applied_tosca=_applied(cluster))  # fmt: skip
            reasons.infrastructure_step(self.events, cluster, "Reconciling",
                                        f"{provider.name} changes {infrastructure_id}")  # fmt: skip
            self.queue.add(ref)
            return
        try:
            state = await provider.state(infrastructure_id)
        except InfrastructureNotFound:
            # gone at the provider: forget it, and build it again (as Krake does) after the
            # back-off, as any failure: a provider that forgets each one at once is not
            # called in a loop
            await self._status(cluster, cluster_id=None, running_on=None, last_applied_tosca=None,
                               state=ClusterState.PENDING, reason=None)  # fmt: skip
            reasons.infrastructure_gone(self.events, cluster, provider.name, infrastructure_id)
            raise ProviderError(f"{provider.name} no longer knows {infrastructure_id}",
                                ReasonCode.CREATE_FAILED) from None  # fmt: skip
        if state is InfrastructureState.CONFIGURED:
            await self._connect(cluster, provider, infrastructure_id)
            return
        if state is InfrastructureState.FAILED:
            failing = self._failures.get(ref)
            creating = status.state is ClusterState.CREATING or (
                failing is not None and failing.reason.code is ReasonCode.CREATE_FAILED
            )
            code = ReasonCode.CREATE_FAILED if creating else ReasonCode.RECONCILE_FAILED
            raise ProviderError(f"{provider.name} reports infrastructure {infrastructure_id} "
                                "failed", code)  # fmt: skip
        if state is InfrastructureState.UNCONFIGURED:
            if status.state is not ClusterState.FAILING_RECONCILIATION:
                await self._status(cluster, state=ClusterState.FAILING_RECONCILIATION)
            await provider.reconfigure(infrastructure_id)
            self.queue.add_after(ref, self.poll)
            return
        started = self._building.setdefault(ref, time.monotonic())
        if time.monotonic() - started > self.create_timeout:
            self._building.pop(ref, None)
            raise ProviderError(f"{infrastructure_id} not configured after "
                                f"{self.create_timeout:g} s", ReasonCode.CREATE_FAILED)  # fmt: skip
        self.queue.add_after(ref, self.poll)  # still being built

    async def _create(self, cluster: Cluster, provider: Provider) -> None:
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        template = await self._template(cluster)
        if cluster.status.state not in (ClusterState.CREATING, ClusterState.FAILED):
            cluster = await self._status(cluster, state=ClusterState.CREATING, reason=None)
        name = key(cluster)
        # never create without looking first: a create whose answer was lost (a timeout,
        # a crash) made one all the same, and the provider's create makes another each time
        infrastructure_id = await provider.find(name)
        made = infrastructure_id is None
        if infrastructure_id is None:
            infrastructure_id = await provider.create(name, template)
        await self._status(
            cluster, cluster_id=infrastructure_id, running_on=cluster.status.scheduled_to,
            last_applied_tosca=_applied(cluster), state=ClusterState.CREATING, reason=None,
        )  # fmt: skip
        self._building[ref] = time.monotonic()
        verb = "creates" if made else "had created"
        reasons.infrastructure_step(self.events, cluster, "Creating",
                                    f"{provider.name} {verb} {infrastructure_id}")  # fmt: skip
        self.queue.add(ref)  # a first look at once (the simulator builds in no time), then polls

    async def _connect(self, cluster: Cluster, provider: Provider, infrastructure_id: str) -> None:
        """Built: its kubeconfig into the spec, then CONNECTING for the observer."""
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        self._building.pop(ref, None)
        if cluster.status.state not in NOT_HANDED_OVER:
            if cluster.spec.kubeconfig is not None:
                return  # the observer's now
        first = cluster.spec.kubeconfig is None  # built, not changed
        kubeconfig = await provider.kubeconfig(infrastructure_id)
        if cluster.spec.kubeconfig != kubeconfig:
            stored = await self.client.get(Cluster, cluster.metadata.name,
                                           cluster.metadata.namespace)  # fmt: skip
            if stored.metadata.resource_version != cluster.metadata.resource_version:
                raise Conflict(409, {"detail": "changed meanwhile"})
            stored.spec.kubeconfig = kubeconfig
            cluster = self._keep(await self.client.update(stored))
        await self._status(cluster, state=ClusterState.CONNECTING, reason=None)
        self._failures.pop(ref, None)  # handed over: a later failure backs off from 2 s again
        if first:
            message = f"{provider.name} built {infrastructure_id}; connecting"
            reasons.infrastructure_step(self.events, cluster, "Created", message)
        else:
            reasons.infrastructure_step(self.events, cluster, "Reconciled",
                                        f"{provider.name} changed {infrastructure_id}; "
                                        "connecting")  # fmt: skip

    # deleting ----------------------------------------------------------------------------

    async def _delete(self, cluster: Cluster) -> None:
        ref = (cluster.metadata.namespace, cluster.metadata.name)
        others = [f for f in cluster.metadata.finalizers if f != FINALIZER]
        if others:
            return  # its applications move away first (the scheduler's eviction finalizer)
        if bound_to_cloud(cluster) or cluster.status.cluster_id:
            provider = await self._provider(cluster)
            infrastructure_id = cluster.status.cluster_id or await provider.find(key(cluster))
            if infrastructure_id is not None:
                try:
                    state = await provider.state(infrastructure_id)
                except InfrastructureNotFound:
                    state = None
                if state is not None:
                    if state is not InfrastructureState.DELETING:
                        await provider.delete(infrastructure_id)
                    if cluster.status.state is not ClusterState.DELETING:
                        await self._status(cluster, state=ClusterState.DELETING, reason=None,
                                           cluster_id=infrastructure_id)  # fmt: skip
                        message = f"{provider.name} deletes {infrastructure_id}"
                        reasons.infrastructure_step(self.events, cluster, "Deleting", message)
                    self.queue.add_after(ref, self.poll)
                    return
        latest = self._current(ref) or cluster
        finalizers = [f for f in latest.metadata.finalizers if f != FINALIZER]
        await self._set_finalizers(latest, finalizers)

    # writes ------------------------------------------------------------------------------

    def _keep(self, cluster: Cluster) -> Cluster:
        self._written[(cluster.metadata.namespace, cluster.metadata.name)] = cluster
        return cluster

    async def _status(self, cluster: Cluster, **fields: Any) -> Cluster:
        """Patch these status fields, if the cluster is still at the revision we read."""
        return self._keep(await self.client.patch_status(
            Cluster, cluster.metadata.name, cluster.metadata.namespace, fields,
            cluster.metadata.resource_version,
        ))  # fmt: skip

    async def _set_finalizers(self, cluster: Cluster, finalizers: list[str]) -> None:
        """An update of the whole cluster (compare-and-swap on its resource_version)."""
        changed = cluster.model_copy(deep=True)
        changed.metadata.finalizers = finalizers
        stored = await self.client.update(changed)
        if finalizers:
            self._keep(stored)


async def _check_fetched(url: str, template: dict[str, Any]) -> None:
    """A template read from a URL passes the rules an inline one passes at the API (parsed
    in a confined worker of this process) before a provider sees it."""
    try:
        found = await template_problems(template, base=url)
    except ProblemError as error:  # no worker could start here: tried again later
        raise ProviderError(error.detail, ReasonCode.INVALID_TOSCA_MANIFEST) from error
    if found:
        message = "; ".join(f"{where}: {why}" for where, why in found[:5])
        raise ProviderError(message[:1000], ReasonCode.INVALID_TOSCA_MANIFEST)


def _applied(cluster: Cluster) -> Any:
    """The ``last_applied_tosca`` patch that records ``spec.tosca`` as applied."""
    return merge_diff(cluster.status.last_applied_tosca, cluster.spec.tosca)


def _is_applied(cluster: Cluster) -> bool:
    """Whether ``spec.tosca`` is what was applied (as the store holds it: no nulls)."""
    return merge_patch({}, cluster.spec.tosca) == cluster.status.last_applied_tosca
