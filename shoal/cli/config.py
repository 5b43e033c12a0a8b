"""Where the API is: ``--api``, $SHOAL_API, the config file, the default; and a client on it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import typer
import yaml

from shoal.cli.errors import CliError, errors_handled
from shoal.client.rest import DEFAULT_URL, ShoalClient

T = TypeVar("T")

ENV_API = "SHOAL_API"
ENV_CONFIG = "SHOAL_CONFIG"
DEFAULT_CONFIG = "~/.config/shoal/config.yaml"


def config_path() -> Path:
    return Path(os.environ.get(ENV_CONFIG) or DEFAULT_CONFIG).expanduser()


def load_config() -> dict[str, Any]:
    """The config file's settings; {} when there is none."""
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CliError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CliError(f"config file {path} is not valid YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(f"config file {path} must hold a mapping such as 'api: http://...'")
    return data


def resolve_api(option: str | None = None) -> str:
    """``--api``, else $SHOAL_API, else the config file's ``api``, else the default."""
    if option:
        return option
    if os.environ.get(ENV_API):
        return os.environ[ENV_API]
    api = load_config().get("api")
    if api is not None and not isinstance(api, str):
        raise CliError(f"config file {config_path()}: 'api' must be a URL string")
    return api or DEFAULT_URL


@dataclass
class CliState:
    """What the root callback stores in ``ctx.obj`` for every command."""

    api: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def api_url(ctx: typer.Context | None) -> str:
    """The API URL for this invocation (works for commands of any module)."""
    state = ctx.find_root().obj if ctx is not None else None
    return resolve_api(state.api if isinstance(state, CliState) else None)


def run(ctx: typer.Context | None, work: Callable[[ShoalClient], Awaitable[T]]) -> T:
    """Run ``work`` with a client of the configured API in a fresh event loop."""
    url = api_url(ctx)

    async def main() -> T:
        async with ShoalClient(url) as client:
            return await work(client)

    with errors_handled(url):
        return asyncio.run(main())


__all__ = ["DEFAULT_URL", "CliState", "api_url", "config_path", "load_config", "resolve_api", "run"]
