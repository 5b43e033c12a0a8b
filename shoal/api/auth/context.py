"""What the guard decided about a request that the routes must honour.

The guard authorises from the path; some answers also depend on the user
inside the route: which namespaces a list across namespaces may read before
selectors and paging run (so neither items nor page tokens nor selector
matches say anything of the others), and whether a write that keeps a secret
by its placeholder comes from someone who may see it. Without security
(library use, tests) everything is visible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from shoal.api.auth.authn import User

VISIBLE_NAMESPACE: ContextVar[Callable[[str | None], bool] | None] = ContextVar(
    "shoal_visible_namespace", default=None
)
"""For a list or watch across namespaces: whether the reader may see a namespace; None: all."""

WRITER_SEES_SECRETS: ContextVar[bool] = ContextVar("shoal_writer_sees_secrets", default=True)
"""Whether the writer may read the secrets of the kind it writes."""


def writer(scope: Mapping[str, Any]) -> User | None:
    """The user the guard let in (``scope["shoal.user"]``); None without security.

    A status write is checked against the fields its writer owns."""
    user = scope.get("shoal.user")
    return user if isinstance(user, User) else None
