"""Exponential back-off: the one formula for every retry in Shoal.

A delay grows by ``factor`` per failure from ``base`` up to ``cap``. The work queue
keeps one failure count per key; a retry loop keeps its own with ``failed`` and
``succeeded``, so no loop doubles a delay by hand.
"""

from __future__ import annotations


class Backoff:
    """Delays ``base``, ``base·factor``, ``base·factor²``… never above ``cap`` (not even
    the first, as client-go's: a cap below the base is every wait)."""

    def __init__(self, base: float, cap: float, factor: float = 2.0) -> None:
        if base <= 0 or cap <= 0 or factor < 1:
            raise ValueError(f"back-off needs base > 0, cap > 0 and factor >= 1, got "
                             f"base={base}, cap={cap}, factor={factor}")  # fmt: skip
        self.base = base
        self.cap = cap
        self.factor = factor
        self.failures = 0

    def __repr__(self) -> str:
        return f"Backoff(base={self.base}, cap={self.cap}, factor={self.factor})"

    def delay(self, failures: int) -> float:
        """Wait after ``failures`` failures in a row (the first waits ``base``); the cap
        however many (a float power overflows past about 2**1023)."""
        try:
            grown = self.base * self.factor ** max(failures - 1, 0)
        except OverflowError:
            return float(self.cap)
        return float(min(self.cap, grown))

    def failed(self) -> float:
        """Count one more failure of this loop; the wait before its next try."""
        self.failures += 1
        return self.delay(self.failures)

    def succeeded(self) -> None:
        """The loop succeeded: its next failure waits ``base`` again."""
        self.failures = 0

    @property
    def current(self) -> float:
        """The wait the last failure asked for (``base`` before any)."""
        return self.delay(self.failures)
