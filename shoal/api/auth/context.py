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
from shoal.api.auth.roles import COMPONENTS, component_user

VISIBLE_NAMESPACE: ContextVar[Callable[[str | None], bool] | None] = ContextVar(
    "shoal_visible_namespace", default=None
)
"""For a list or watch across namespaces: whether the reader may see a namespace; None: all."""

WRITER_SEES_SECRETS: ContextVar[bool] = ContextVar("shoal_writer_sees_secrets", default=True)
"""Whether the writer may read the secrets of the kind it writes."""


def writer(scope: Mapping[str, Any]) -> User | None:
    """The user the guard let in (``scope["shoal.user"]``), whose status writes are checked
    against the fields it owns; None when any field may be written.

    None without security, and for any user but a component without RBAC: where
    every request is allowed (Krake's ``always-allow``, its ``static`` user), users
    are not told apart, and a component still keeps to its own fields.
    """
    user = scope.get("shoal.user")
    if not isinstance(user, User):
        return None
    if scope.get("shoal.rbac") is False and user.name not in _COMPONENTS:
        return None
    return user


_COMPONENTS = frozenset(component_user(name) for name in COMPONENTS)
