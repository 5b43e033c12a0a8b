"""Small helpers shared by the tests: free ports and waiting on conditions.

They are ``shoal.testing``'s, which the benches use too.
"""

from __future__ import annotations

from shoal.testing.launch import free_port
from shoal.testing.wait import wait_for

__all__ = ["free_port", "wait_for"]
