"""Simulated Kubernetes clusters (`shoal sim`); see shoal.sim.server and docs/sim.md."""

from shoal.sim.server import SimFleet, SimServer, SimThread, start_sim

__all__ = ["SimFleet", "SimServer", "SimThread", "start_sim"]
