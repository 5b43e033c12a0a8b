"""Agent plugins; importing this package registers the built-in ones."""

from shoal.agent.plugins import geo as geo
from shoal.agent.plugins import nodes as nodes
from shoal.agent.plugins import resources as resources
from shoal.agent.plugins import sampling as sampling

__all__ = ["geo", "nodes", "resources", "sampling"]
