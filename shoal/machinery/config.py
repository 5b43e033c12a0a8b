"""Settings files: a pydantic model read from YAML, with errors that name the file, the line
and the field, for every component that takes a ``--config``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from shoal.machinery.paths import field_path

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A settings file that cannot be read or does not fit its model: one line per problem,
    each ``FILE:LINE: FIELD: REASON``."""


def load(
    model: type[M],
    path: str | Path | None,
    section: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> M:
    """``model`` from the YAML file at ``path`` (its defaults when None). With ``section``, a
    file may hold the settings under that key (``scheduler:``) or at its top level.
    ``overrides`` (command-line flags) win over the file."""
    text = ""
    offset: tuple[str, ...] = ()
    if path is None:
        data: Any = {}
    else:
        text = _read(Path(path))
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            raise ConfigError(f"{where}: not YAML: {getattr(error, 'problem', error)}") from None
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise ConfigError(f"{path}:1: must be a mapping of settings")
        offset = (section,) if section is not None and section in data else ()
        data = data.get(section, data) if section is not None else data
    try:
        return model.model_validate({**data, **(overrides or {})})
    except ValidationError as error:
        root = yaml.compose(text) if text else None  # the lines, only when there is an error

        def located(loc: tuple[Any, ...]) -> str:
            line = _line_of(root, (*offset, *loc))
            return f"{path}:{line}" if path is not None and line else str(path or "defaults")

        raise _error(error, located) from None


def validate(model: type[M], data: Any, where: str = "settings") -> M:
    """``model`` from settings already parsed (a mapping built in code or read elsewhere);
    a ``ConfigError`` names ``where`` and each wrong field."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise _error(error, lambda loc: where) from None


def _error(error: ValidationError, where: Callable[[tuple[Any, ...]], str]) -> ConfigError:
    """One line per problem: ``where(field): FIELD: REASON``."""
    lines = []
    for problem in error.errors(include_url=False, include_input=False):
        loc = tuple(problem.get("loc", ()))
        reason = str(problem.get("msg", "invalid")).removeprefix("Value error, ")
        lines.append(f"{where(loc)}: {field_path(loc)}: {reason}")
    return ConfigError("\n".join(lines))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it: {error.strerror}") from None


def _line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """The line (from 1) of the YAML node at ``loc``, or of the deepest one that exists."""
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            node = node.value[part] if part < len(node.value) else None
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line
