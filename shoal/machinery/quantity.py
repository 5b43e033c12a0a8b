"""Kubernetes resource quantities ("250m", "1.5", "128Mi", "1G", "1e3").

One grammar for every reader: the API's validation, the agents' fit checks, the cluster
observer's node totals, the simulated clusters and the CLI's printing.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

# <signed number><suffix>: binary (Ki…Ei), decimal (n u m "" k M G T P E) or an exponent.
QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
EXAMPLES = "e.g. 500m, 128Mi, 2"

_MULTIPLIER: dict[str, Decimal] = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def is_request(value: object) -> bool:
    """A quantity a pod may request or be limited to: not negative, written without spaces.
    Cheap (a pattern, no arithmetic): the API checks every quantity of every pod it takes."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return math.isfinite(value) and value >= 0
    return isinstance(value, str) and value[:1] != "-" and QUANTITY.fullmatch(value) is not None


def exact(value: object) -> Decimal:
    """The quantity as an exact decimal; ``ValueError`` naming the value when it is not one."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return Decimal(str(value))
    match = QUANTITY.match(str(value).strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity ({EXAMPLES})")
    number, exponent, suffix = match.groups()
    if exponent:
        return Decimal(number + exponent)
    return Decimal(number) * _MULTIPLIER[suffix or ""]


def parse(value: object) -> float:
    """The quantity as a number; ``ValueError`` naming the value when it is not one."""
    return float(exact(value))


def number(value: object) -> float:
    """The quantity as a number, 0 when unreadable: for what a member cluster reports."""
    try:
        return parse(value)
    except ValueError:
        return 0.0


def format_cpu(millis: int) -> str:
    """Millicores as Kubernetes prints them: "2", "250m"."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(amount: int) -> str:
    """Bytes in the largest binary unit that divides them: "512Gi", "128Mi", "1000"."""
    for suffix, size in _BINARY:
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)
