"""The ``shoal`` command: root app, generic verbs, and the place to plug in groups.

Other modules add their commands without touching this file's body:

* list the module in ``EXTENSIONS`` and give it ``def install(root: typer.Typer) -> None``
  (``register`` works too) that calls ``root.add_typer(...)`` or ``root.command(...)``,
  or list it with a group name and give it a module-level ``app = typer.Typer()``; or
* call ``shoal.cli.main.add_group(sub_app, "name", "help")`` / ``add_command(fn, "name")``
  from code that imports this module; or
* publish a ``shoal.cli`` entry point ``name = "package.module:install"``.

Names reserved for other modules: ``api``, ``up``, ``scheduler``, ``sim``,
``kube-controller``, ``reschedule``, ``agent``, ``gc``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable
from typing import Any

import typer

from shoal.cli import commands, kube  # noqa: F401  (kube: explain and dryrun of shoal kube app)
from shoal.cli.config import CliState
from shoal.cli.errors import ShoalGroup

log = logging.getLogger(__name__)

app = typer.Typer(
    cls=ShoalGroup,
    name="shoal",
    help="Shoal: place applications on a fleet of Kubernetes clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Modules that plug commands in: (module, group name). A module with
# ``install(root)`` or ``register(root)`` adds its own commands; otherwise its
# ``app`` (a typer.Typer) becomes ``shoal <group name>``. Missing modules are skipped.
EXTENSIONS: list[tuple[str, str | None]] = [
    ("shoal.cli.run", None),  # shoal api, shoal scheduler, shoal up
    ("shoal.sim.cli", "sim"),  # shoal sim
    ("shoal.cli.reschedule", "reschedule"),  # shoal reschedule
]


def add_group(sub: typer.Typer, name: str, help: str | None = None, hidden: bool = False) -> None:
    """Add a command group (``shoal NAME ...``); its own help is kept unless one is given."""
    if help is None:
        app.add_typer(sub, name=name, hidden=hidden)
    else:
        app.add_typer(sub, name=name, help=help, hidden=hidden)


def add_command(function: Callable[..., Any], name: str, help: str | None = None) -> None:
    """Add one command (``shoal NAME``)."""
    app.command(name, help=help)(function)


@app.callback()
def root(
    ctx: typer.Context,
    api: str | None = typer.Option(
        None,
        "--api",
        metavar="URL",
        help="Shoal API URL (default: $SHOAL_API, then 'api:' in "
        "~/.config/shoal/config.yaml or $SHOAL_CONFIG, then http://127.0.0.1:8080).",
    ),
) -> None:
    """Shoal: place applications on a fleet of Kubernetes clusters."""
    ctx.obj = CliState(api=api)


commands.install(app)


def _install(module_name: str, name: str | None) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            return  # that module is not written (yet)
        log.warning("shoal: commands of %s unavailable: %s", module_name, error)
        return
    except Exception as error:  # a module in the making must not break every command
        log.warning("shoal: commands of %s unavailable: %r", module_name, error)
        return
    hook = getattr(module, "install", None) or getattr(module, "register", None)
    if callable(hook):
        hook(app)
    elif name is not None and isinstance(getattr(module, "app", None), typer.Typer):
        add_group(module.app, name)


def _install_all() -> None:
    for module_name, name in EXTENSIONS:
        _install(module_name, name)
    for entry in importlib.metadata.entry_points(group="shoal.cli"):
        try:
            hook = entry.load()
            hook(app)
        except Exception:  # a broken third-party plugin must not break the CLI
            log.warning("shoal: cannot load plugin %s", entry.value, exc_info=True)


_install_all()


def main() -> None:
    """Console entry point ``shoal``."""
    app()


if __name__ == "__main__":
    main()
