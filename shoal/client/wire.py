"""How a request of Shoal's API is spelled: the paths of a kind's collection and items, the
query of a dry run and of optional parameters, and bodies in their JSON form.

The REST client (``rest``) and the CLI's synchronous client spell requests alike.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shoal.model.base import Kind


def collection_path(kind: type[Kind], namespace: str | None = None) -> str:
    """The path of a kind's collection (in ``namespace``, for a namespaced kind)."""
    if kind.namespaced and namespace is not None:
        return f"/{kind.api_name()}/namespaces/{namespace}/{kind.plural}"
    return f"/{kind.api_name()}/{kind.plural}"


def item_path(kind: type[Kind], name: str, namespace: str | None = None) -> str:
    """The path of one object; a namespaced kind needs its namespace."""
    if kind.namespaced:
        if namespace is None:
            raise ValueError(f"{kind.kind_name()} is namespaced: give a namespace")
        return f"/{kind.api_name()}/namespaces/{namespace}/{kind.plural}/{name}"
    return f"/{kind.api_name()}/{kind.plural}/{name}"


def dry_run_query(dry_run: bool) -> dict[str, Any] | None:
    """The query of a write made as a dry run (None: a real one)."""
    return {"dry_run": "true"} if dry_run else None


def query_params(params: dict[str, Any] | None) -> dict[str, str] | None:
    """Query parameters as text, those set to None left out."""
    if not params:
        return None
    return {k: str(v) for k, v in params.items() if v is not None}


def dumped(obj: Kind) -> dict[str, Any]:
    """An object as its JSON body."""
    return obj.model_dump(mode="json")


def wire(value: Any) -> Any:
    """Models (nested too) in their wire form, for bodies; orjson writes enums and datetimes."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON")
