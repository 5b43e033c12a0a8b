"""Who may ask an agent to sample and commit: bearer tokens the agent is given.

An agent binds pods on its member cluster with that cluster's credentials, so
a caller must prove it is the fleet scheduler: it sends its API token, and the
agent accepts only the tokens it was started with (``SHOAL_AGENT_CALLERS``,
comma-separated; ``shoal up`` gives it the scheduler's). Tokens are kept as
SHA-256 digests and compared in constant time per request: no round trip to
the API on the fleet's hot path. ``/healthz`` answers anyone. An agent started
with no callers (library use, tests) answers everyone, as the API without a
security configuration does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable

from shoal.machinery.asgi import ASGIApp, Receive, Scope, Send
from shoal.machinery.problems import problem

ENVIRONMENT = "SHOAL_AGENT_CALLERS"
OPEN_PATHS = frozenset({"/healthz"})


def digests(tokens: Iterable[str]) -> frozenset[bytes]:
    return frozenset(hashlib.sha256(t.encode()).digest() for t in tokens if t)


def from_environment() -> frozenset[bytes] | None:
    """The callers named in ``SHOAL_AGENT_CALLERS``; None when it is not set."""
    value = os.environ.get(ENVIRONMENT)
    return digests(value.split(",")) if value else None


class CallerCheck:
    """ASGI middleware: 401 for a request without an accepted bearer token."""

    def __init__(self, app: ASGIApp, callers: frozenset[bytes]) -> None:
        self.app = app
        self.callers = callers

    def _accepted(self, scope: Scope) -> bool:
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() != b"bearer":
                    return False
                digest = hashlib.sha256(token.strip()).digest()
                return any(hmac.compare_digest(digest, c) for c in self.callers)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._accepted(scope):
            await self.app(scope, receive, send)
            return
        response = problem(401, "the agent answers only the fleet scheduler: send its token")
        response.headers["www-authenticate"] = 'Bearer realm="shoal-agent"'
        await response(scope, receive, send)
