"""How a ``shoal`` command fails: one red line on stderr and an exit code, never a traceback.

Exit status 1 is for errors the API or the input caused, 2 for an API that
cannot be reached (and, from click, for wrong usage).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from shoal.client.rest import ApiError, Unreachable


class CliError(Exception):
    """A failure to report as one message; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    Console(stderr=True, highlight=False, soft_wrap=True).print(Text(message, style="red"))
    raise typer.Exit(code)


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    parts = [p for p in parts if not p.startswith(("function-", "union[", "json-or-python"))]
    return ".".join(parts) or "body"


def describe_validation(error: ValidationError, what: str = "") -> str:
    """Name each failing field the way the API does (``spec.min: ...``)."""
    reasons = []
    for item in error.errors(include_url=False, include_input=False):
        msg = str(item.get("msg", "invalid"))
        msg = msg.removeprefix("Value error, ")
        reasons.append(f"{_field(item.get('loc', ()))}: {msg}")
    prefix = f"INVALID_RESOURCE: {what}: " if what else "INVALID_RESOURCE: "
    return prefix + "; ".join(reasons[:10])


@contextmanager
def errors_handled(url: str | None = None) -> Iterator[None]:
    """Turn the errors a command can meet into a red message and an exit code."""
    from shoal.cli.config import ENV_API, config_path

    try:
        yield
    except ApiError as error:
        fail(f"{error.title or error.status}: {error.detail}")
    except Unreachable as error:
        where = url or str(error).split(": ")[0]
        fail(
            f"cannot reach the Shoal API at {where} "
            f"(set it with --api, ${ENV_API} or 'api:' in {config_path()})",
            code=2,
        )
    except ValidationError as error:
        fail(describe_validation(error))
    except CliError as error:
        fail(error.message, error.code)


class ShoalGroup(TyperGroup):
    """Group class of the root app: every command's errors become messages."""

    def invoke(self, ctx: Any) -> Any:
        with errors_handled():
            return super().invoke(ctx)
