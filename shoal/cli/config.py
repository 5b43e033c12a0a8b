"""Where the API is: ``--api``, $SHOAL_API, the config file, the default; and a client on it.
Where the store is, for the commands that open it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from shoal.cli.errors import CliError, yaml_error
from shoal.cli.handling import errors_handled
from shoal.cli.locations import DEFAULT_URL, ENV_API, config_path

if TYPE_CHECKING:
    from shoal.cli.http import Http
    from shoal.client.credentials import Credentials
    from shoal.client.rest import ShoalClient

T = TypeVar("T")

def credentials() -> Credentials:
    """Token, CA and client certificate: $SHOAL_TOKEN… first, then the config file."""
    from shoal.client.credentials import Credentials

    return Credentials.resolve(load_config())


def load_config() -> dict[str, Any]:
    """The config file's settings; {} when there is none."""
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CliError(f"cannot read config file {path}: {error.strerror}") from None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise yaml_error(path, error) from None
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


ENV_STORE = "SHOAL_STORE"


def resolve_store(option: str | None, default: Path) -> str:
    """``--store``, else $SHOAL_STORE, else the config's ``store``, else SQLite at ``default``."""
    url = option or os.environ.get(ENV_STORE) or None
    if url is None:
        configured = load_config().get("store")
        if configured is not None and not isinstance(configured, str):
            raise CliError(f"config file {config_path()}: 'store' must be a URL string")
        url = configured or f"sqlite://{default.resolve()}"
    if not url.startswith(("sqlite://", "etcd://")):
        raise CliError(f"unknown store URL {url!r}: use sqlite:///path or etcd://host:port[,...]")
    return url


class Ctx(Protocol):
    """A click or typer context (typer vendors its own click): what commands pass along."""

    def find_root(self) -> Any: ...


@dataclass
class CliState:
    """What the root callback stores in ``ctx.obj`` for every command."""

    api: str | None = None
    debug: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def api_url(ctx: Ctx | None) -> str:
    """The API URL for this invocation (works for commands of any module)."""
    if ctx is None:
        return resolve_api(None)
    root = ctx.find_root()
    if isinstance(root.obj, CliState):
        return resolve_api(root.obj.api)
    return resolve_api(getattr(root, "params", {}).get("api"))  # completion: no callback ran


def http(ctx: Ctx | None, timeout: float = 30.0) -> Http:
    """The light synchronous client of the configured API (for commands that only read)."""
    from shoal.cli.http import Http

    return Http(api_url(ctx), timeout, credentials())


def run(ctx: Ctx | None, work: Callable[[ShoalClient], Awaitable[T]]) -> T:
    """Run ``work`` with a client of the configured API in a fresh event loop."""
    import asyncio

    from shoal.client.rest import ShoalClient

    url = api_url(ctx)

    async def main() -> T:
        found = credentials()
        async with ShoalClient(url, token=found.token, ssl_context=found.ssl_context()) as client:
            return await work(client)

    with errors_handled(url):
        return asyncio.run(main())


__all__ = [
    "DEFAULT_URL",
    "CliState",
    "api_url",
    "config_path",
    "http",
    "load_config",
    "resolve_api",
    "run",
]
