"""Simulated Kubernetes clusters (`shoal sim`); see shoal.sim.server and docs/sim.md."""

from shoal.sim.server import SimClusters, SimServer, SimThread, start_sim

__all__ = ["SimClusters", "SimServer", "SimThread", "start_sim"]
