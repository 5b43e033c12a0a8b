"""``shoal up --pull-clusters N``: simulated clusters that join in pull mode, an agent each.

Each is a ``shoal sim`` cluster (``pull-1``…) whose agent is a process of its own,
``shoal join`` as an operator runs it: a join token made by the administrator, the
CA pinned by its hash, the credential kept in ``<data_dir>/pull/<name>/``. A restarted
``shoal up`` (or a restarted agent) resumes with the kept credential, without a token.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml

from shoal.client.rest import ShoalClient
from shoal.machinery.files import write_atomically
from shoal.machinery.types import Obj
from shoal.system.supervise import Child, Supervisor

AddCluster = Callable[[str, int, dict[str, str]], Awaitable[Obj]]


def names(count: int) -> list[str]:
    return [f"pull-{i + 1}" for i in range(count)]


async def start_pull_clusters(
    supervisor: Supervisor,
    admin: ShoalClient,
    count: int,
    nodes: int,
    add: AddCluster,
    data_dir: Path,
    url: str,
    pin: str,
    log_level: str,
) -> list[str]:
    """Add ``count`` simulated clusters and start ``shoal join`` for each, pinning the CA of
    hash ``pin``; their names."""
    kube_dir = data_dir / "kubeconfigs"
    started = []
    for name in names(count):
        member = kube_dir / f"{name}.yaml"  # the simulator's token is read back from it
        write_atomically(member, yaml.safe_dump(await add(name, nodes, {"location": "EDGE"})),
                         private=True)  # fmt: skip
        state = data_dir / "pull" / name
        args = ["join", "--api", url, "--ca-hash", pin, "--kubeconfig", str(member),
                "--name", name, "-l", "location=EDGE", "--state-dir", str(state),
                "--log-level", log_level]  # fmt: skip
        if not (state / "credential.json").exists():
            made = await admin.request(
                "POST", "/kubernetes/namespaces/default/jointokens", body={"ttl": 3600}
            )
            args += ["--token", made["token"]]
        await supervisor.start(Child(f"join-{name}", args, {"SHOAL_CONFIG": os.devnull}))
        started.append(name)
    return started
