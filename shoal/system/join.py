"""``shoal join``: a member cluster joins the hub in pull mode and runs its agent.

First start: the API's CA is pinned by its hash, the join token exchanged for the
cluster's own credential, kept under ``--state-dir``. Later starts resume with
the kept credential (no token). Then, until a signal: the credential renewed at
half its life, the cluster's status and lease written by the agent
(``shoal.agent.pull``), which reads the member with the member's own credentials, and the
cluster's copies run there (``shoal.agent.copies``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from shoal.machinery.tasks import cancel_and_wait
from shoal.machinery.types import Obj
from shoal.system.process import configure_logging, console, run_until_signal

log = logging.getLogger(__name__)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class CannotJoin(Exception):
    """Why ``shoal join`` cannot go on, and what to do (the command prints it)."""


def version() -> str:
    return importlib.metadata.version("shoal")


def in_cluster_kubeconfig(account: Path = SERVICE_ACCOUNT) -> Obj:
    """A kubeconfig of the pod's service account, as in-cluster clients read it."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (account / "token").exists():
        raise RuntimeError("in-cluster: no service account here (give --kubeconfig FILE)")
    server = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": {
            "server": server, "certificate-authority": str(account / "ca.crt")}}],
        "users": [{"name": "agent", "user": {"token": (account / "token").read_text().strip()}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster",
                                                        "user": "agent"}}],
        "current-context": "in-cluster",
    }  # fmt: skip


def member_kubeconfig(path: Path | None) -> Obj:
    """The member cluster's kubeconfig: the file ``path``, else the pod's service account."""
    if path is not None:
        from shoal.machinery.kubeconfig import read_kubeconfig

        return read_kubeconfig(str(path))
    try:
        return in_cluster_kubeconfig()
    except RuntimeError as error:
        raise CannotJoin(str(error)) from None


@dataclass
class Join:
    """What ``shoal join`` was told."""

    api: str
    name: str
    state_dir: Path
    member: Obj  # the member cluster's kubeconfig
    token: str | None = None
    ca_hash: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    every: float | None = None  # seconds between status writes (None: the agent's default)


async def credential_of(join: Join) -> object:
    """The kept credential, or a new one for the join token; a ``JoinError`` saying why not."""
    from shoal.agent import joining

    kept = joining.load(join.state_dir)
    if kept is not None:
        if kept.name != join.name or kept.api.rstrip("/") != join.api.rstrip("/"):
            raise joining.JoinError(
                f"{join.state_dir} holds the credential of {kept.namespace}/{kept.name} at "
                f"{kept.api}: give another --state-dir"
            )
        if join.ca_hash:
            joining.check_pin(kept.ca, join.ca_hash)
        if kept.expires > time.time():
            return kept
        log.warning("the kept credential expired; joining again with the token")
    if not join.token:
        raise joining.JoinError("no kept credential in --state-dir: give --token and --ca-hash")
    if not join.ca_hash:
        raise joining.JoinError("--ca-hash: required with --token (shoal up prints it)")
    ca = await joining.pinned_ca(join.api, join.ca_hash)
    kept = await joining.exchange(join.api, ca, join.token, join.name, join.labels, version())
    joining.save(join.state_dir, kept)
    return kept


async def run_joined(join: Join, started: asyncio.Event | None = None) -> None:
    """Join (or resume), then keep the status, the lease and the credential; until
    cancelled."""
    from shoal.agent import joining
    from shoal.agent.agent import connect
    from shoal.agent.copies import CopyRunner
    from shoal.agent.pull import RENEW_EVERY, StatusKeeper
    from shoal.client.rest import ShoalClient

    kept = await credential_of(join)
    assert isinstance(kept, joining.Kept)
    kube = await connect(join.member, 10.0)
    client = ShoalClient(kept.api, token=kept.credential, ssl_context=joining.trust(kept.ca))
    keeper = StatusKeeper(client, kube, kept.namespace, kept.name, version(),
                          join.every or RENEW_EVERY)  # fmt: skip
    runner = CopyRunner(client, kube, kept.namespace, kept.name, state_dir=join.state_dir)
    tasks = [
        asyncio.create_task(keeper.run()),
        asyncio.create_task(runner.run()),
        asyncio.create_task(joining.keep_renewed(client, kept, join.state_dir)),
    ]
    try:
        if started is not None:  # the first status written, or a task failed first
            first = asyncio.create_task(keeper.renewed.wait())
            await asyncio.wait([first, *tasks], return_when=asyncio.FIRST_COMPLETED)
            first.cancel()
            if keeper.renewed.is_set():
                started.set()
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            try:
                task.result()
            except Exception as error:
                if not joining.revoked(error):
                    raise
                aside = joining.set_aside(join.state_dir)
                raise joining.JoinError(
                    f"{getattr(error, 'detail', error)}: this agent stops (its credential is "
                    f"now {aside}); join again with a token made for the cluster "
                    f"(shoal kube cluster join-token create --cluster {join.name})"
                ) from None
    finally:
        await cancel_and_wait(tasks)
        await client.close()
        await kube.api.close()


def run_join(join: Join, log_level: str) -> None:
    """``shoal join`` until a signal; ``CannotJoin`` saying why it cannot."""
    from shoal.agent.joining import JoinError

    configure_logging(log_level)

    async def main() -> None:
        started = asyncio.Event()

        async def announce() -> None:
            await started.wait()
            console.print(f"cluster {join.name} joined {join.api} in pull mode; its agent "
                          f"keeps its status (credential in {join.state_dir})")  # fmt: skip

        task = asyncio.create_task(announce())
        try:
            await run_joined(join, started)
        except JoinError as error:
            raise CannotJoin(str(error)) from None
        finally:
            task.cancel()

    run_until_signal(main)
