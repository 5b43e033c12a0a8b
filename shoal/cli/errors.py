"""How a ``shoal`` command fails: one red line on stderr and an exit code, never a traceback.

Exit status 1 is for errors the API or the input caused, 2 for an API that
cannot be reached (and, from click, for wrong usage). ``shoal --debug`` (or
$SHOAL_DEBUG=1) prints the traceback as well.

This module imports neither the client nor pydantic: a command that never
loaded them cannot have raised their errors, so they are recognised only
when their modules are already imported (``sys.modules``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import click

from shoal.cli.locations import ENV_API, config_path

ENV_DEBUG = "SHOAL_DEBUG"
PROBLEM_TYPE = "urn:shoal:problem:"


class CliError(Exception):
    """A failure to report as one message; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` in red on stderr and exit (SystemExit: click and typer both pass it)."""
    click.secho(message, fg="red", err=True)
    raise SystemExit(code)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choices, or ``""``."""
    close = difflib.get_close_matches(word.lower(), sorted(set(choices)), n=3, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"


def yaml_error(path: object, error: Exception) -> CliError:
    """A YAML error naming the file and the line (not PyYAML's ``<unicode string>``)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    name = "<stdin>" if str(path) == "-" else str(path)
    where = f"{name}, line {mark.line + 1}, column {mark.column + 1}" if mark else name
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    return CliError(f"{where}: not valid YAML: {f'{context}, ' if context else ''}{problem}")


# what the API answered, in the user's words -----------------------------------------


def validation_errors(error: Any) -> list[dict[str, str]]:
    """The ``{field, reason}`` of each failing field of a pydantic ValidationError."""
    from shoal.machinery.paths import field_path

    return [
        {
            "field": field_path(item.get("loc", ())),
            "reason": str(item.get("msg", "invalid")).removeprefix("Value error, "),
        }
        for item in error.errors(include_url=False, include_input=False)
    ]


def field_lines(
    title: str, what: str, errors: Sequence[dict[str, Any]], where: Any = None
) -> str:
    """``TITLE: what`` then one line per field: ``  [file:line: ]field: reason``.

    ``where(field)`` gives the place of a field in the user's file (``m.yaml:12``), or None.
    """
    lines = [f"{title}: {what}" if what else f"{title}:"]
    for error in errors[:20]:
        field = str(error.get("field", "body"))
        place = where(field) if where is not None else None
        lines.append(f"  {place + ': ' if place else ''}{field}: {error.get('reason', '')}")
    if len(errors) > 20:
        lines.append(f"  … and {len(errors) - 20} more")
    return "\n".join(lines)


def describe_validation(error: Any, what: str = "", where: Any = None) -> str:
    """Name each failing field of a pydantic ValidationError the way the API does."""
    return field_lines("INVALID_RESOURCE", what, validation_errors(error), where)


def is_shoal_problem(document: Any) -> bool:
    """Whether an error answer is a problem document of Shoal's (not some other server's)."""
    return isinstance(document, dict) and str(document.get("type", "")).startswith(PROBLEM_TYPE)


def problem_message(status: int, problem: dict[str, Any], what: str = "", where: Any = None) -> str:
    """An RFC 7807 problem document in words: ``TITLE: detail``, or a line per wrong field."""
    title = str(problem.get("title") or status)
    errors = problem.get("errors")
    if isinstance(errors, list) and errors and all(isinstance(e, dict) for e in errors):
        return field_lines(title, what, errors, where)
    line = f"{title}: {what + ': ' if what else ''}{problem.get('detail', '')}"
    if status == 401:
        line += f" (the CLI sends $SHOAL_TOKEN, else 'token:' in {config_path()})"
    return line


def not_shoal(url: str, status: int | str, path: str = "/healthz", body: bytes = b"") -> CliError:
    """The answer came from something that is not a Shoal API: say what it answered."""
    if status == 200:
        shown = body[:80].decode(errors="replace") if body else "nothing"
        what = f'it answered {path} with {shown!r}, where Shoal answers {{"status": "ok"}}'
    else:
        what = f"it answered {status} to {path}"
    return CliError(f"{url} is not a Shoal API: {what}", 2)


def untrusted(url: str, reason: str) -> CliError:
    """The API answered TLS with a certificate the CLI does not trust (or that names
    another host)."""
    return CliError(
        f"certificate not trusted: {url} presented a certificate the CLI cannot verify "
        f"({reason}); give the CA that signed it with $SHOAL_CA or 'ca:' in {config_path()}",
        2,
    )


def unreachable(url: str) -> CliError:
    return CliError(
        f"cannot reach the Shoal API at {url} "
        f"(set it with --api, ${ENV_API} or 'api:' in {config_path()}; for a shoal up "
        "started in another directory, $SHOAL_CONFIG=<its data-dir>/security/config.yaml)",
        2,
    )
