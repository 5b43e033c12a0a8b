"""The member pods this agent made, by the fleet pod's uid: looked up, listed, deleted.

The fleet scheduler asks before it samples a pod it did not place itself (a
scheduler that restarted between a commit and the pod's status write finds
the pod where the commit put it, instead of placing it a second time), and
deletes the member pod when the fleet pod is deleted. A commit of the uid
still in flight is waited for under its node's lock, so a delete never races
a create into an orphan. The node's resources come back when the watch sees
the pod gone (a terminating pod still runs), not at the delete call.
"""

from __future__ import annotations

from shoal.agent.cache import NodeCache, Placed
from shoal.agent.config import AgentConfig
from shoal.agent.locks import NodeLocks
from shoal.client.kube import KubeApiError, KubeCluster
from shoal.machinery.types import Obj


def _entry(key: str, placed: Placed, in_flight: bool) -> Obj:
    namespace, name = key.split("/", 1)
    return {"namespace": namespace, "name": name, "node": placed.node, "inFlight": in_flight}


class Members:
    def __init__(self, kube: KubeCluster, cache: NodeCache, locks: NodeLocks,
                 config: AgentConfig) -> None:
        self.kube = kube
        self.cache = cache
        self.locks = locks
        self.config = config

    def lookup(self, uids: list[str]) -> dict[str, Obj]:
        """uid → where its member pod is (or is being made), for those this cluster has."""
        return {uid: _entry(*found) for uid, found in self.cache.find(uids).items()}

    def listing(self) -> dict[str, Obj]:
        return {uid: _entry(*found) for uid, found in self.cache.made().items()}

    async def delete(self, uids: list[str]) -> tuple[list[str], list[str]]:
        """Delete the member pods of ``uids``; (deleted, absent)."""
        deleted: list[str] = []
        for uid, (key, placed, in_flight) in self.cache.find(uids).items():
            if in_flight:  # the commit holds the node's lock until its create is decided
                async with self.locks.hold(placed.node, self.config.lock_timeout):
                    pass
                again = self.cache.find([uid]).get(uid)
                if again is None:
                    continue  # the create failed: nothing was made
                key = again[0]
            namespace, name = key.split("/", 1)
            try:
                await self.kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                                        timeout=self.config.commit_timeout)
            except KubeApiError as error:
                if error.status != 404:
                    raise
            deleted.append(uid)
        return deleted, [uid for uid in uids if uid not in deleted]
