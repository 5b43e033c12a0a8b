"""Several pull clusters' agents in one process, for ``bench/pull.py``: each is ``shoal
join``'s own code (``run_joined``) with its own join token, credential, connection to the
API and connection to its member cluster. It imports only what ``shoal join`` imports.

    python bench/pull_agents.py SPEC.json
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import yaml

from shoal.system.join import Join, run_joined


def joins(spec_file: Path) -> list[Join]:
    """The agents listed in ``spec_file``."""
    spec = json.loads(spec_file.read_text())
    return [Join(api=spec["api"], name=a["name"], state_dir=Path(a["state_dir"]),
                 member=yaml.safe_load(Path(a["kubeconfig"]).read_text()), token=a["token"],
                 ca_hash=spec["ca_hash"], labels=a["labels"]) for a in spec["agents"]]  # fmt: skip


async def run_agents(listed: list[Join]) -> None:
    """Run the agents until killed."""
    await asyncio.gather(*(run_joined(join) for join in listed))


if __name__ == "__main__":
    asyncio.run(run_agents(joins(Path(sys.argv[1]))))
