"""Leader election on a ``Lease``: one active controller, the others on standby.

Safety rests on compare-and-swap: every acquire and renew is an update on the
``resource_version`` last seen, so two candidates never both win the same
version. Expiry is judged by wall clocks (``renew_time + duration < now`` by
the candidate's clock), so, as in Kubernetes, clocks are assumed to be roughly
synchronised: the holder stops acting ``renew_deadline`` after the start of
its last successful write (by its monotonic clock), while others take over
only ``duration`` after that write's ``renew_time``. The gap
(``duration - renew_deadline``, a third of the duration by default) is the
tolerated clock skew plus scheduling delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from shoal.client.rest import ApiError, Conflict, NotFound, ShoalClient, Unreachable
from shoal.model.base import Metadata, utcnow
from shoal.model.coordination import Lease, LeaseSpec

log = logging.getLogger(__name__)


class LeaderElection:
    """Acquire, renew and release the lease ``name`` as ``identity``."""

    def __init__(
        self,
        client: ShoalClient,
        name: str,
        identity: str,
        *,
        duration: float = 15.0,
        renew_every: float | None = None,
        renew_deadline: float | None = None,
        retry_every: float | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew_every = duration / 3 if renew_every is None else renew_every
        self.renew_deadline = duration * 2 / 3 if renew_deadline is None else renew_deadline
        self.retry_every = self.renew_every if retry_every is None else retry_every
        if not 0 < self.renew_every < self.renew_deadline < duration:
            raise ValueError("need 0 < renew_every < renew_deadline < duration")
        self._lease: Lease | None = None
        self._leading = False
        self._deadline = 0.0  # monotonic time at which this term ends without a renew
        self._release_on_exit = True
        self._task: asyncio.Task[object] | None = None

    @property
    def is_leader(self) -> bool:
        """True only while the last successful write is within ``renew_deadline``."""
        return self._leading and time.monotonic() < self._deadline

    async def run(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        """Campaign forever; run ``on_started_leading`` as a task during each term.

        The task is cancelled as soon as the term ends (lost CAS, no renew in
        time, or the task itself finished). Cancelling ``run`` releases the
        lease so that a standby takes over at once.
        """
        self._task = asyncio.current_task()
        try:
            while True:
                if await self._try_acquire():
                    log.info("%s leads %s", self.identity, self.name)
                    await self._lead(on_started_leading)
                    log.info("%s stopped leading %s", self.identity, self.name)
                await asyncio.sleep(self.retry_every)
        finally:
            self._leading = False
            if self._release_on_exit:
                await self._release()  # a no-op unless a term was under way

    def _crash(self) -> None:
        """Test hook: stop like a killed process, without releasing the lease."""
        self._release_on_exit = False
        if self._task is not None:
            self._task.cancel()

    # terms ------------------------------------------------------------------------

    async def _try_acquire(self) -> bool:
        started = time.monotonic()
        now = utcnow()
        try:
            async with asyncio.timeout(self.renew_deadline):
                try:
                    current = await self.client.get(Lease, self.name)
                except NotFound:
                    spec = LeaseSpec(
                        holder=self.identity,
                        renew_time=now,
                        acquire_time=now,
                        duration=self.duration,
                    )
                    lease = await self.client.create(
                        Lease(metadata=Metadata(name=self.name), spec=spec)
                    )
                else:
                    if current.spec.holder != self.identity and not current.spec.expired(now):
                        return False
                    transitions = current.spec.transitions
                    if current.spec.holder != self.identity:
                        transitions += 1
                    current.spec = LeaseSpec(
                        holder=self.identity,
                        renew_time=now,
                        acquire_time=now,
                        duration=self.duration,
                        transitions=transitions,
                    )
                    lease = await self.client.update(current)  # CAS on resource_version
        except Conflict:
            return False
        except (ApiError, Unreachable, TimeoutError) as error:
            log.warning("%s: acquiring lease %s failed: %s", self.identity, self.name, error)
            return False
        self._lease = lease
        self._deadline = started + self.renew_deadline
        self._leading = True
        return True

    async def _lead(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        worker = asyncio.create_task(self._work(on_started_leading))
        keeper = asyncio.create_task(self._keep())
        try:
            await asyncio.wait({worker, keeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost = keeper.done()
            self._leading = False
            for task in (worker, keeper):
                task.cancel()
            # Not gather(): a worker that swallows cancellation must not hang the elector.
            for task in (worker, keeper):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if lost:
            self._lease = None  # nothing to release: someone else may hold it already
        else:
            await self._release()  # the work ended by itself: hand over now

    async def _work(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        try:
            await on_started_leading()
        except Exception:  # the task's top level: log, end the term, campaign again
            log.exception("%s: leading task of %s failed", self.identity, self.name)

    async def _keep(self) -> None:
        """Renew every ``renew_every``; return when the term is lost."""
        while True:
            await asyncio.sleep(self.renew_every)
            while True:
                remaining = self._deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(remaining):
                        await self._renew()
                    break
                except (Conflict, NotFound, TimeoutError):
                    return
                except (ApiError, Unreachable) as error:
                    log.warning("%s: renewing lease %s failed: %s", self.identity, self.name, error)
                    await asyncio.sleep(min(self.renew_every / 4, remaining))

    async def _renew(self) -> None:
        assert self._lease is not None
        started = time.monotonic()
        lease = self._lease.model_copy(deep=True)
        lease.spec.renew_time = utcnow()
        self._lease = await self.client.update(lease)  # CAS: 409 when anyone else wrote
        self._deadline = started + self.renew_deadline

    async def _release(self) -> None:
        if self._lease is None:
            return
        lease = self._lease.model_copy(deep=True)
        lease.spec.holder = None
        lease.spec.renew_time = None
        self._lease = None
        try:
            async with asyncio.timeout(self.renew_deadline):
                await self.client.update(lease)
        except (ApiError, Unreachable, TimeoutError) as error:
            log.warning("%s: releasing lease %s failed: %s", self.identity, self.name, error)
