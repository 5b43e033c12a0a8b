"""The CLI's top level: every error a command meets becomes one red line and an exit code.

This module imports neither the client nor pydantic: a command that never loaded them
cannot have raised their errors, so they are recognised only when their modules are
already imported (``sys.modules``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from shoal.cli.errors import (
    ENV_DEBUG,
    CliError,
    describe_validation,
    did_you_mean,
    fail,
    is_shoal_problem,
    problem_message,
    unreachable,
)
from shoal.cli.http import identify


def _known(error: BaseException, url: str | None) -> CliError | None:
    """The CliError for an error of a loaded module, or None."""
    rest = sys.modules.get("shoal.client.rest")
    if rest is not None:
        if isinstance(error, rest.ApiError):
            if url is not None and not is_shoal_problem(error.problem):
                identify(url)
            return CliError(problem_message(error.status, error.problem))
        if isinstance(error, rest.Unreachable):
            return unreachable(url or str(error).split(": ")[0])
    settings = sys.modules.get("shoal.machinery.config")
    if settings is not None and isinstance(error, settings.ConfigError):
        return CliError(str(error))
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(error, pydantic.ValidationError):
        return CliError(describe_validation(error))
    return None


def _traceback() -> None:
    import traceback

    traceback.print_exc()


def _debug() -> bool:
    if os.environ.get(ENV_DEBUG, "") not in ("", "0"):
        return True
    ctx = click.get_current_context(silent=True)
    state = ctx.find_root().obj if ctx is not None else None
    return bool(getattr(state, "debug", False))


@contextmanager
def errors_handled(url: str | None = None) -> Iterator[None]:
    """Turn the errors a command can meet into a red message and an exit code."""
    try:
        yield
    except CliError as error:
        if _debug():
            _traceback()
        fail(error.message, error.code)
    except Exception as error:  # the CLI's top level: one line, the traceback on --debug
        if type(error).__module__.startswith(("click.", "typer.")):
            raise  # usage errors and exits, which click and typer print themselves
        if _debug():
            _traceback()
        try:
            known = _known(error, url)
        except CliError as better:
            known = better
        if known is not None:
            fail(known.message, known.code)
        fail(f"{type(error).__name__}: {error} (shoal --debug shows where)")


class FriendlyGroup:
    """Mixin of every group class (click's and typer's): errors become messages, unknown
    commands get a suggestion."""

    def invoke(self, ctx: Any) -> Any:
        with errors_handled():
            return super().invoke(ctx)  # type: ignore[misc]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:  # type: ignore[attr-defined]
            hint = did_you_mean(name, self.list_commands(ctx))  # type: ignore[attr-defined]
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)  # type: ignore[misc]
