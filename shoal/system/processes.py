"""``shoal up`` on every core: the API, the simulator, the scheduler, each controller and the
cluster agents as processes of their own, supervised (``shoal.system.supervise``).

The children are the same commands an operator runs (``shoal api``, ``shoal sim``,
``shoal scheduler``, ``shoal kube-controller``...), each with its own token
from the data directory's security set-up. Their logs are in
``<data_dir>/logs/<component>.log``. The simulator keeps its port and its
clusters' tokens across restarts (they are read back from the kubeconfigs),
so the stored clusters reach it again after it is restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import aiohttp
import typer
import yaml

from shoal.machinery import outbound
from shoal.machinery.files import write_atomically
from shoal.machinery.tls import ca_hash
from shoal.machinery.types import Obj
from shoal.system.components import NAMES, SCHEDULER
from shoal.system.demo import (
    banner,
    create_demo,
    outbound_policy,
    sample_metrics,
    saved_token,
    sim_admin_token,
    start_fleet,
)
from shoal.system.installation import Installation
from shoal.system.metrics_ports import describe, metrics_args, metrics_ports
from shoal.system.process import configure_logging, console, run_until_signal
from shoal.system.supervise import Child, Supervisor

AddCluster = Callable[[str, int, dict[str, str]], Awaitable[Obj]]


def plain_api_config(directory: Path) -> Path:
    """``api.yaml`` without its ``tls`` section: ``shoal up --no-tls`` serves HTTP on loopback."""
    config = yaml.safe_load((directory / "api.yaml").read_text()) or {}
    config.pop("tls", None)
    path = directory / "api-http.yaml"
    return write_atomically(path, yaml.safe_dump(config, sort_keys=False))


def sim_adder(admin: str, kube_dir: Path, admin_token: str) -> AddCluster:
    """Add a cluster to the simulator through its admin API (the cluster's earlier token if
    any); ``admin_token``: the admin API's."""

    async def add(name: str, nodes: int, labels: dict[str, str]) -> Obj:
        body: Obj = {"name": name, "nodes": nodes, "labels": labels}
        token = saved_token(kube_dir, name)
        if token is not None:
            body["token"] = token
        limit = aiohttp.ClientTimeout(total=30)
        headers = {"Authorization": f"Bearer {admin_token}"}
        async with aiohttp.ClientSession(
            timeout=limit, raise_for_status=True, headers=headers
        ) as http:
            try:
                async with http.post(f"{admin}/admin/clusters", json=body) as resp:
                    return dict((await resp.json())["kubeconfig"])
            except aiohttp.ClientResponseError as error:
                if error.status != 409:
                    raise
            async with http.get(f"{admin}/admin/clusters/{name}/kubeconfig") as resp:
                return dict(await resp.json())

    return add


async def _until_answers(url: str, verify: Any, what: str, proc: Child) -> None:
    """Until ``url`` answers (any status); RuntimeError if the child exits first."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        for _ in range(600):
            if proc.proc is not None and proc.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with code {proc.proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(url, ssl=verify) as answer:
                    if answer.status < 500:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{what} did not answer on {url}")


def run_processes(up: Installation, *, sim_port: int, metrics_port: int = 0) -> None:
    """Start every component as a child, set up the fleet and the demo, supervise until a
    signal. The simulator listens on ``sim_port``; the controllers' ``/metrics`` from
    ``metrics_port`` on (0: none)."""
    data_dir, store_url, port, tls = up.data_dir, up.store_url, up.port, up.tls
    clusters, nodes, demo, log_level = up.clusters, up.nodes, up.demo, up.log_level
    from shoal.api.auth import bootstrap
    from shoal.client.credentials import Credentials
    from shoal.client.rest import ShoalClient
    from shoal.controllers.prometheus import TOKEN_SETTING
    from shoal.sim.cli import ENV_TOKEN, write_admin_url

    configure_logging(log_level, one_line=log_level.lower() != "debug")
    sim_token = sim_admin_token(data_dir)  # before the files readers wait for
    setup = bootstrap.ensure(data_dir, tls=tls)
    api_config = setup.directory / "api.yaml" if tls else plain_api_config(setup.directory)
    scheme = "https" if tls else "http"
    url = f"{scheme}://127.0.0.1:{port}"
    logs = data_dir / "logs"
    kube_dir = data_dir / "kubeconfigs"
    kube_dir.mkdir(parents=True, exist_ok=True)
    base_env = {"SHOAL_CONFIG": os.devnull, "SHOAL_CA": str(setup.ca) if tls else "",
                outbound.SETTING: os.environ.get(outbound.SETTING)
                or str(outbound_policy(data_dir))}  # fmt: skip
    supervisor = Supervisor(logs, lambda line: console.print(f"[bold yellow]supervisor[/]: {line}"))
    pin = ca_hash(setup.ca.read_bytes())  # what pull clusters' agents pin

    def identity(component: str) -> dict[str, str]:
        scrape = {TOKEN_SETTING: setup.tokens[bootstrap.METRICS]}  # for its /metrics
        return {**base_env, "SHOAL_TOKEN": setup.token_of(component), **scrape}

    async def main() -> None:
        watcher = asyncio.create_task(supervisor.run())
        trust = Credentials(ca=str(setup.ca)).ssl_context() if tls else None
        try:
            api = Child("api", ["api", "--store", store_url, "--port", str(port),
                                "--config", str(api_config), "--log-level", log_level,
                                "--kube-finalizer"],
                        env={outbound.SETTING: base_env[outbound.SETTING]})  # fmt: skip
            admin = f"http://127.0.0.1:{sim_port}"
            write_admin_url(data_dir, admin)
            fleet: dict[str, tuple[int, dict[str, str]]] = {}
            add = sim_adder(admin, kube_dir, sim_token)

            async def add_clusters() -> None:
                await _until_answers(admin + "/admin/clusters", True, "the simulator", sim)
                for name, (count, labels) in fleet.items():
                    await add(name, count, labels)

            sim = Child("sim", ["sim", "--clusters", "0", "--port", str(sim_port),
                                "--out", str(kube_dir), "--system-pods"],
                        env={**base_env, ENV_TOKEN: sim_token},
                        after_start=add_clusters)  # fmt: skip
            # The API and the simulator start side by side; the controllers as soon as
            # the API answers, while the clusters are being registered.
            await supervisor.start(api)
            await asyncio.gather(
                supervisor.start(sim),
                _until_answers(url + "/readyz", trust or True, "the API", api),
            )
            console.print(f"[bold green]Shoal API[/] on {url}  (store {store_url})")
            await _start_controllers(
                supervisor, url, identity, up.scheduler_config, log_level, metrics_port
            )
            async with ShoalClient(
                url, token=setup.tokens[bootstrap.ADMIN], ssl_context=trust
            ) as c:
                await sample_metrics(c)

                async def remember(name: str, count: int, labels: dict[str, str]) -> Obj:
                    fleet[name] = (count, labels)
                    return await add(name, count, labels)

                restarted = await start_fleet(
                    c, data_dir, clusters, nodes, remember, admin, sim_token
                )
                agents = ["--api", url, "--kubeconfigs", str(kube_dir),
                          "--clusters", ",".join(fleet), "--log-level", log_level]  # fmt: skip
                # The agents answer only the fleet scheduler (``shoal.agent.callers``).
                callers = {"SHOAL_AGENT_CALLERS": setup.token_of(SCHEDULER)}
                await supervisor.start(
                    Child("agents", agents, {**identity("agent"), **callers}, module=__name__)
                )
                if up.pull_clusters:
                    from shoal.system.pull import start_pull_clusters

                    pulled = await start_pull_clusters(
                        supervisor, c, up.pull_clusters, nodes, add, data_dir, url, pin, log_level
                    )
                    fleet.update({name: (nodes, {"location": "EDGE"}) for name in pulled})
                pids = ", ".join(f"{name} {pid}" for name, pid in supervisor.pids().items())
                console.print(f"[bold green]Processes[/]: {pids}; logs in {logs}/")
                if demo:
                    await create_demo(c, list(fleet), restarted)
            if up.exit_after_demo:
                return
            banner(setup, url, data_dir)
            await watcher
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            supervisor.stop()

    run_until_signal(main, quiet=True)


async def _start_controllers(
    supervisor: Supervisor,
    url: str,
    identity: Callable[[str], dict[str, str]],
    scheduler_config: Path | None,
    log_level: str,
    metrics_port: int = 0,
) -> None:
    common = ["--api", url, "--log-level", log_level]
    config = ["--config", str(scheduler_config)] if scheduler_config is not None else []
    ports = metrics_ports(metrics_port, NAMES)
    for name in NAMES:
        args = [name, *common, *(config if name == SCHEDULER else []), *metrics_args(ports, name)]
        await supervisor.start(Child(name, args, identity(name)))
    console.print(f"[bold green]Scheduler and controllers[/], a process each: {', '.join(NAMES)}")
    if ports:
        console.print(f"[bold green]Their metrics[/]: {describe(ports, metrics_port)} "
                      "(bearer token: security/metrics.token)")  # fmt: skip


def run_agents(
    api_url: Annotated[str, typer.Option("--api", help="Shoal API URL")],
    kubeconfigs: Annotated[Path, typer.Option("--kubeconfigs", help="Directory of NAME.yaml")],
    clusters: Annotated[str, typer.Option("--clusters", help="Comma-separated cluster names")],
    log_level: Annotated[str, typer.Option("--log-level")] = "warning",
) -> None:
    """The cluster agents of ``shoal up``'s simulated clusters, in one process."""
    from shoal.agent.local import start_all
    from shoal.client.credentials import Credentials
    from shoal.client.rest import ShoalClient

    configure_logging(log_level)

    async def main() -> None:
        found = Credentials.resolve()  # this child's own: $SHOAL_TOKEN
        names = [n for n in clusters.split(",") if n]
        configs = {n: yaml.safe_load((kubeconfigs / f"{n}.yaml").read_text()) for n in names}
        async with ShoalClient(api_url, token=found.token, ssl_context=found.ssl_context()) as c:
            agents = await start_all(c, configs, keep=True)
            try:
                await asyncio.Event().wait()
            finally:
                await agents.close()

    run_until_signal(main)


if __name__ == "__main__":  # the agents' child: python -m shoal.system.processes --api ...
    typer.run(run_agents)
