"""Each controller runs alone as ``shoal <controller> --api URL`` and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
from prometheus_client import REGISTRY

from shoal.api.server import ApiServer
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.scheduling import RescheduleTask, RescheduleTaskSpec
from shoal.testing import shipped
from tests.util import free_ports, wait_for


async def _start(name: str, api: ApiServer, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shoal.cli.main",
        name,
        "--api",
        api.url,
        "--log-level",
        "warning",
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "SHOAL_TOKEN": shipped.token(name)},  # its identity, as shoal up's
    )


def _watches() -> float:
    """Watch streams the in-process API serves now."""
    return REGISTRY.get_sample_value("shoal_api_watches") or 0.0


async def _stop(proc: asyncio.subprocess.Process) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = await asyncio.wait_for(proc.communicate(), 15)
    return out.decode()


@pytest.mark.integration
@pytest.mark.parametrize(
    "name",
    ["scheduler", "kube-controller", "cluster-observer", "garbage-collector"],
)
async def test_controller_runs_alone_and_stops_cleanly(api: ApiServer, name: str) -> None:
    before = _watches()
    proc = await _start(name, api)
    # Running once its watches are open (a SIGTERM sent while Python still imports, as a
    # fixed sleep did on a loaded machine, kills it before its handler is installed).
    await wait_for(lambda: proc.returncode is not None or _watches() > before, timeout=60,
                   message=f"{name} watching the API")  # fmt: skip
    assert proc.returncode is None, await _stop(proc)
    out = await _stop(proc)
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out


@pytest.mark.integration
async def test_reschedule_controller_alone_with_leader_election_and_metrics(
    api: ApiServer, client: ShoalClient
) -> None:
    port = free_ports(1)  # the controller process binds it later
    proc = await _start(
        "reschedule-controller",
        api,
        "--leader-elect",
        "--lease-duration",
        "2",
        "--metrics-port",
        str(port),
    )
    try:
        # A task whose only target does not exist is finished by the controller once it leads.
        ghost = {"api": "kubernetes", "kind": "Application", "namespace": "default", "name": "x"}
        spec = RescheduleTaskSpec.model_validate({"target_ref_resource": [ghost]})
        await client.create(RescheduleTask(metadata=Metadata(name="nothing"), spec=spec))

        async def finished() -> bool:
            task = await client.get(RescheduleTask, "nothing")
            return task.status.finish_time is not None

        await wait_for(finished, timeout=20, message="task finished by the standalone controller")
        lease = await client.request("GET", "/core/leases/reschedule-controller")
        assert lease["spec"]["holder"]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = await reader.read()
        writer.close()
        assert b"python_info" in body
    finally:
        out = await _stop(proc)
    assert proc.returncode == 0, out
