"""What a list request asks, read and refused apart from the store: its label selector,
its field selector's reach, and its continue token.

Each refusal is a 400 naming the query parameter; the routes and ``Resources.list_bytes``
share them.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from shoal.api.auth.secrets import secret_paths
from shoal.machinery.problems import ProblemError
from shoal.machinery.selectors import ConstraintError, LabelSelector
from shoal.machinery.selectors.fields import FieldSelector
from shoal.model.base import Kind


def namespace_of(key: str) -> str | None:
    """The namespace in a store key ``/{api}/{plural}/{namespace}/{name}``; None if cluster-wide."""
    parts = key.split("/")
    return parts[3] if len(parts) > 4 else None


def refuse_secret_fields(kind: type[Kind], fields: FieldSelector | None) -> None:
    """A field selector may not test a secret field: its matches would tell the value to
    readers who only see the placeholder."""
    if fields is None:
        return
    for path in fields.paths():
        for secret in secret_paths(kind):
            if covers(path, secret) or covers(secret, path):
                name = ".".join(path)
                raise ProblemError(
                    400,
                    f"field_selector: {name} is a secret field; selectors may not test it",
                    errors=[{"field": "field_selector", "reason": f"{name} is a secret field"}],
                )


def covers(prefix: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """``prefix`` is a prefix of ``path`` ("*" matches any part)."""
    return len(prefix) <= len(path) and all(
        a == b or "*" in (a, b) for a, b in zip(prefix, path, strict=False)
    )


def parse_label_selector(text: str | None) -> LabelSelector | None:
    if not text:
        return None
    try:
        return LabelSelector.parse(text)
    except ConstraintError as error:
        raise ProblemError(
            400,
            f"label_selector: {error}",
            errors=[{"field": "label_selector", "reason": str(error)}],
        ) from None


def make_continue(key: str, revision: int) -> str:
    raw = orjson.dumps({"k": key, "r": revision})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def continue_key(token: str) -> str:
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    return str(orjson.loads(raw)["k"])


def parse_continue(token: str | None, prefix: str) -> tuple[str | None, int | None]:
    if not token:
        return None, None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        key, revision = str(data["k"]), int(data["r"])
    except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise ProblemError(
            400,
            "continue: not a token returned by a previous list",
            errors=[{"field": "continue", "reason": "not a token returned by a previous list"}],
        ) from None
    if not key.startswith(prefix):
        raise ProblemError(
            400,
            "continue: token belongs to another list",
            errors=[{"field": "continue", "reason": "token belongs to another list"}],
        )
    return key, revision
