"""Kubernetes resource quantities ("250m", "1.5", "128Mi", "1G") as integers."""

from __future__ import annotations

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def _number(text: str) -> float:
    text = str(text).strip()
    if not text:
        return 0.0
    for suffix, mult in _BIN.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * mult
    if text[-1] in _DEC and not text[-2:-1].isalpha():
        return float(text[:-1]) * _DEC[text[-1]]
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    if text.endswith("u"):
        return float(text[:-1]) / 1e6
    if text.endswith("n"):
        return float(text[:-1]) / 1e9
    return float(text)


def parse_cpu(value: object) -> int:
    """CPU in millicores."""
    if value is None:
        return 0
    try:
        return round(_number(str(value)) * 1000)
    except ValueError:
        return 0


def parse_bytes(value: object) -> int:
    """Memory (or any byte quantity) in bytes."""
    if value is None:
        return 0
    try:
        return int(_number(str(value)))
    except ValueError:
        return 0


def format_cpu(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(n: int) -> str:
    for suffix, mult in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n % mult == 0 and n >= mult:
            return f"{n // mult}{suffix}"
    return str(n)
