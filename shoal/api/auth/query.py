"""A request's query as the guard reads it, and as the route will: each parameter decoded
once, none given twice, and the limits of a list's page and a watch's heartbeat applied.

The guard authorises what it read and hands the route the query it spelled from it, so
the two never read different parameters.
"""

from __future__ import annotations

from urllib.parse import quote_plus, unquote_plus

from shoal.api.auth.config import Limits


def read_query(query: bytes) -> dict[str, str] | str:
    """The query's parameters, each decoded once as the route decodes them (keys too:
    ``%77atch`` is ``watch``), or why it is refused: a parameter given more than once
    (the guard and the route would read different ones)."""
    params: dict[str, str] = {}
    for pair in query.split(b"&"):
        if not pair:
            continue
        raw_key, _, raw_value = pair.partition(b"=")
        key = unquote_plus(raw_key.decode("latin-1"))
        if key in params:
            return f"{key}: given more than once"
        params[key] = unquote_plus(raw_value.decode("latin-1"))
    return params


def checked_query(params: dict[str, str], verb: str, limits: Limits) -> bytes | str:
    """The query the route will read, spelled from the parameters the guard read, or why
    it is refused.

    A list's page size is at most ``max_page``, and that when none is asked (the client
    follows ``continue``); a watch's heartbeat is at least ``min_heartbeat``.
    """
    out: list[str] = []
    limit: int | None = None
    for key, value in params.items():
        if key == "limit" and verb in ("list", "list_all"):
            if not (value.isascii() and value.isdigit()) or int(value) < 1:
                return f"limit: must be a whole number of at least 1, not {value!r}"
            limit = min(int(value), limits.max_page)
            continue
        if key == "heartbeat" and verb == "watch":
            try:
                heartbeat = float(value)
            except ValueError:
                return f"heartbeat: must be a number of seconds, not {value!r}"
            if not heartbeat >= limits.min_heartbeat:
                return f"heartbeat: must be at least {limits.min_heartbeat:g} seconds"
        out.append(f"{quote_plus(key)}={quote_plus(value)}")
    if verb in ("list", "list_all"):
        out.append(f"limit={limit if limit is not None else limits.max_page}")
    return "&".join(out).encode()
