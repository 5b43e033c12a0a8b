"""Scheduler plugins; importing this package registers the built-in ones."""

from shoal.scheduler.plugins import builtin as builtin
from shoal.scheduler.plugins import cordon as cordon
from shoal.scheduler.plugins import fit as fit

__all__ = ["builtin", "cordon", "fit"]
