"""Events: the recorder every component emits through, and their expiry."""

from shoal.events.recorder import Recorder

__all__ = ["Recorder"]
