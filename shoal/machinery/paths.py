"""Field paths as error messages write them: ``spec.manifest[0].kind``.

The API's problems, the model's findings and the CLI's messages all name a field this way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def join(base: str, *parts: str | int) -> str:
    """``join("spec.manifest", 0, "spec")`` → ``spec.manifest[0].spec``."""
    path = base
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = part
    return path


def field_path(loc: Iterable[Any]) -> str:
    """A pydantic error location as a field path (``spec.manifest[0].kind``).

    ``body`` (FastAPI's) and pydantic's markers such as ``function-after[...]`` are dropped.
    """
    path = ""
    for part in loc:
        if part == "body" or str(part).startswith(("function-", "union[", "json-or-python")):
            continue
        path = join(path, part) if isinstance(part, int) or path else str(part)
    return path or "body"
