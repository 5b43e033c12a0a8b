"""List, then watch from the list's revision: the one loop under every cache Shoal keeps.

Shoal's informer (objects of its own API), the observer's reflectors, the deploy
controller's watches and the agent's node cache (objects of member clusters) differ in
what they list and how they apply an event, not in how they follow a collection:

- a watch that ends resumes at once from the last revision seen;
- a compacted revision (410 Gone) lists again at once;
- any other failure is reported to ``failed``, then retried after a delay that doubles
  from ``retry`` up to ``max_retry``; ``failed`` returns True when the next attempt
  must list first (the list proves the source answers and refills the cache); a
  ``failed`` that raises (``stop_on_failure``) ends the loop with that error;
- with ``resync``, the loop lists again every ``resync`` seconds even while the watch
  looks healthy: a safety net against a watch that silently stopped delivering.

The loop knows nothing of HTTP or of either API: ``list`` refills the caller's cache and
returns the revision to watch from (None: nothing to watch, look again later), and
``watch`` applies each event and yields the revision after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Generic, TypeVar

from shoal.machinery.backoff import Backoff

R = TypeVar("R")  # a revision, as the source spells it (int for Shoal, str for Kubernetes)


@dataclass(eq=False)
class ListWatch(Generic[R]):
    """Follow one collection until cancelled; ``revision`` is where a resumed watch starts."""

    list: Callable[[], Awaitable[R | None]]
    watch: Callable[[R], AsyncIterator[R]]
    compacted: Callable[[Exception], bool]
    failed: Callable[[Exception], bool | None]
    _: KW_ONLY
    retry: float = 0.2
    max_retry: float = 5.0
    resync: float | None = None
    revision: R | None = field(default=None, init=False)

    async def run(self) -> None:
        backoff = Backoff(self.retry, max(self.retry, self.max_retry))  # the first as asked
        listed_at = 0.0
        while True:
            timer: asyncio.Timeout | None = None
            try:
                if self.revision is None or self._resync_due(listed_at):
                    self.revision = await self.list()
                    listed_at = time.monotonic()
                    backoff.succeeded()
                    if self.revision is None:  # nothing to watch here: look again later
                        await asyncio.sleep(self.resync or self.max_retry)
                        continue
                timer = asyncio.timeout(self._watch_for(listed_at))
                async with timer:
                    async for revision in self.watch(self.revision):
                        self.revision = revision
                        backoff.succeeded()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the loop's top level: report, back off, retry
                if isinstance(error, TimeoutError) and timer is not None and timer.expired():
                    continue  # the safety-net list is due
                if self.compacted(error):
                    self.revision = None
                    continue
                if self.failed(error):
                    self.revision = None
                await asyncio.sleep(backoff.failed())

    async def run_until(self, done: asyncio.Event) -> None:
        """Follow until ``done`` is set: for a waiter (a command waiting for a state),
        not a cache. An error ``failed`` raises ends it too, with that error."""
        runner = asyncio.ensure_future(self.run())
        waiter = asyncio.ensure_future(done.wait())
        try:
            await asyncio.wait((runner, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not runner.done():
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner
        if not runner.cancelled():
            runner.result()

    def _resync_due(self, listed_at: float) -> bool:
        return self.resync is not None and time.monotonic() - listed_at >= self.resync

    def _watch_for(self, listed_at: float) -> float | None:
        """Seconds the watch may run before the safety-net list (at least one)."""
        if self.resync is None:
            return None
        return max(1.0, self.resync - (time.monotonic() - listed_at))


def stop_on_failure(error: Exception) -> bool:
    """A ``failed`` for a loop that must not outlive a failure (a command waiting for a
    state says why it could not, rather than retrying unseen)."""
    raise error
