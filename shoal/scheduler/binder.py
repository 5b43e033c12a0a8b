"""The commit phase's transport: bindings of concurrent passes go out in batches.

Under load a request carries hundreds of bindings and when idle a lone binding
leaves at once (``shoal.client.batcher``). Every item keeps its own
``resource_version`` precondition: a batch never binds from a stale view.
"""

from __future__ import annotations

from typing import Any

from shoal.client.batcher import Batcher
from shoal.client.rest import ShoalClient


class Binder(Batcher):
    def __init__(self, client: ShoalClient, *, max_batch: int = 500, in_flight: int = 2) -> None:
        super().__init__(client.bind_many, max_batch=max_batch, in_flight=in_flight)

    async def bind(self, item: dict[str, Any]) -> int:
        """Bind one application; its new resource_version, or the API's error for it.

        ``item`` is the JSON form of a ``BindingItem`` (built directly: no model
        round trip on the scheduler's hot path; the API validates it).
        """
        return await self.write(item)
