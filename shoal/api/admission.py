"""Admission of create and update bodies: the rules of ``shoal.model.validation``, dry runs,
and warnings sent back in ``Warning`` headers (as Kubernetes does).

The rules run on what a client sends, never on what the store gives back, so
objects stored before a rule existed still load, list and delete.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from fastapi import Query

from shoal.api import unknown_fields
from shoal.api.templates import translate
from shoal.machinery.problems import invalid_error
from shoal.model import validation
from shoal.model.base import Kind
from shoal.model.validation import schemas

log = logging.getLogger(__name__)

_WARNINGS: ContextVar[list[str] | None] = ContextVar("shoal_warnings", default=None)


async def admit(obj: Kind) -> None:
    """Refuse ``obj`` with a 422 naming every wrong field; pass its warnings on.

    A template it carries is parsed once, off the event loop (``validation.check_templates``);
    an application's template or archive becomes its manifest first (``templates``).
    """
    await translate(obj)
    findings = validation.check(obj)
    findings += await validation.check_templates(obj)
    errors = [f.as_error() for f in findings if not f.warning]
    if errors:
        raise invalid_error(errors)
    warnings = _WARNINGS.get()
    if warnings is not None:
        warnings.extend(f"{f.field}: {f.reason}" for f in findings if f.warning)


def log_schema_status() -> None:
    """Say once, at start-up, which schemas manifests are checked against (or that none are)."""
    line = schemas.status()
    (log.info if line.startswith("manifest schemas:") else log.warning)(line)


# dry runs ---------------------------------------------------------------------------


def dry_run_params() -> list[inspect.Parameter]:
    """``?dry_run=true`` and Kubernetes' ``?dryRun=All`` on every write."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter(
            "dry_run",
            keyword,
            annotation=bool,
            default=Query(False, description="Run every check, answer what would be stored, "
                          "store nothing"),
        ),
        inspect.Parameter(
            "dry_run_all",
            keyword,
            annotation=str | None,
            default=Query(None, alias="dryRun", pattern="^All$", description="Kubernetes' "
                          "spelling of dry_run=true"),
        ),
    ]


def is_dry(kw: dict[str, Any]) -> bool:
    return bool(kw.get("dry_run")) or kw.get("dry_run_all") == "All"


def query_is_dry(query: Any) -> bool:
    """The same for a raw query (the fast paths, which FastAPI does not parse)."""
    value = str(query.get("dry_run", "")).lower()
    return value in ("true", "1", "yes", "on") or query.get("dryRun") == "All"


# warnings ---------------------------------------------------------------------------

Scope = dict[str, Any]


class Warnings:
    """ASGI middleware: warnings of admission leave as ``Warning: 299 - "..."`` headers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        found: list[str] = []  # only http.response.start messages get them (not lifespan)
        token = _WARNINGS.set(found)

        async def send_with_warnings(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and found:
                headers = list(message.get("headers", []))
                headers.extend((b"warning", _header(text)) for text in found)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_warnings)
        finally:
            _WARNINGS.reset(token)


def warn(text: str) -> None:
    """Send ``text`` back in a ``Warning`` header of the request in progress."""
    warnings = _WARNINGS.get()
    if warnings is not None:
        warnings.append(text)


def _header(text: str) -> bytes:
    """``299 - "text"``, the text a quoted string (RFC 9110: ``\\"`` and ``\\\\`` escaped)."""
    clean = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{clean}"'.encode("latin-1", "replace")


_DRY: ContextVar[bool] = ContextVar("shoal_dry_run", default=False)


class dry_run:
    """Within it, writes run every check and answer what they would store, storing nothing."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _DRY.set(self.on)

    def __exit__(self, *exc: object) -> None:
        _DRY.reset(self._token)


def dry() -> bool:
    """Whether the write in progress is a dry run."""
    return _DRY.get()


def with_dry_run(
    endpoint: Callable[..., Awaitable[Any]], params: list[inspect.Parameter]
) -> tuple[Callable[..., Awaitable[Any]], list[inspect.Parameter]]:
    """A write endpoint that also takes ``dry_run``/``dryRun`` and honours them (and
    documents ``fieldValidation``, which ``shoal.api.routes`` applies to the body)."""

    async def write(**kw: Any) -> Any:
        on = is_dry(kw)
        kw.pop("dry_run", None)
        kw.pop("dry_run_all", None)
        kw.pop("field_validation", None)  # applied to the body before (shoal.api.routes)
        with dry_run(on):
            return await endpoint(**kw)

    return write, [*params, *dry_run_params(), unknown_fields.parameter()]
