"""Scheduler plugins; importing this package registers the built-in ones."""

from shoal.scheduler.plugins import builtin as builtin

__all__ = ["builtin"]
