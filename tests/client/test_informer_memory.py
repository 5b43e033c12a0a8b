"""An informer's listing is frozen out of the collector's sight, in a server process only."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, sys
    from shoal.api.server import start_api
    from shoal.client.informer import Informer, running
    from shoal.client.rest import ShoalClient
    from shoal.machinery.memory import tune_gc
    from shoal.model.kubernetes import Application
    from tests.api.samples import APPLICATION

    async def main() -> None:
        if sys.argv[1] == "server":
            tune_gc()  # as every Shoal server process does before it serves
        api = await start_api()
        try:
            async with ShoalClient(api.url) as client:
                for i in range(50):
                    body = APPLICATION.body(f"a{i}", "default")
                    await client.create(Application.model_validate(body))
                informer = Informer(client, Application)
                async with running(informer):
                    cached = [informer.get(f"a{i}", "default") for i in range(50)]
                    watched = {id(o) for o in gc.get_objects()}
                    seen = sum(id(o) in watched for o in cached)
                    print(len(cached), seen)
        finally:
            await api.stop()

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(("process", "walked"), [("server", 0), ("test", 50)])
def test_a_listing_is_frozen_in_a_server_process(process: str, walked: int) -> None:
    """A server process freezes the cache after the listing: the collector walks none of
    its objects again. A test process freezes nothing, and the collector still sees them
    all (it alone reclaims cyclic garbage)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, process], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["50", str(walked)]
