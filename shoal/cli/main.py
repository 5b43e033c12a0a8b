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

from shoal.cli import core, infra, kube
from shoal.cli.common import (
    DEFAULT_NAMESPACE,
    CliState,
    Output,
    ShoalGroup,
    apply_documents,
    delete_object,
    get_object,
    list_objects,
    output_option,
    resolve_kind,
)

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


add_group(kube.app, "kube", "Applications and clusters (kubernetes).")
add_group(core.app, "core", "Metrics, metrics providers, roles and role bindings (core).")
add_group(infra.app, "infra", "Clouds that clusters are created on (infrastructure).")

KIND_HELP = "Kind: plural, kind name or short name (app, cluster, gm, gmp, m, mp, gc, cloud...)."


@app.command("get")
def get(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help=KIND_HELP),
    name: str | None = typer.Argument(None, help="Name; without it, list them all."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace."),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces", help="Every namespace."),
    selector: str | None = typer.Option(None, "-l", "--selector", help="Label selector."),
    output: Output = output_option(),
    watch: bool = typer.Option(False, "-w", "--watch", help="Print changes as they happen."),
    watch_timeout: float | None = typer.Option(None, "--watch-timeout", hidden=True),
) -> None:
    """Show one object, or list the objects of a kind."""
    the_kind = resolve_kind(kind)
    if name is None:
        list_objects(
            ctx,
            the_kind,
            namespace,
            all_namespaces=all_namespaces,
            selector=selector,
            output=output,
            watch=watch,
            watch_timeout=watch_timeout,
        )
    else:
        get_object(ctx, the_kind, name, namespace, output)


@app.command("list")
def list_(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help=KIND_HELP),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace."),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces", help="Every namespace."),
    selector: str | None = typer.Option(None, "-l", "--selector", help="Label selector."),
    output: Output = output_option(),
    watch: bool = typer.Option(False, "-w", "--watch", help="Print changes as they happen."),
    watch_timeout: float | None = typer.Option(None, "--watch-timeout", hidden=True),
) -> None:
    """List the objects of a kind."""
    list_objects(
        ctx,
        resolve_kind(kind),
        namespace,
        all_namespaces=all_namespaces,
        selector=selector,
        output=output,
        watch=watch,
        watch_timeout=watch_timeout,
    )


@app.command("delete")
def delete(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help=KIND_HELP),
    name: str = typer.Argument(..., help="Name."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace."),
    output: Output = output_option(),
) -> None:
    """Delete one object of any kind."""
    delete_object(ctx, resolve_kind(kind), name, namespace, output)


@app.command("apply")
def apply(
    ctx: typer.Context,
    file: str = typer.Option(..., "-f", "--file", help="YAML file of objects (- is stdin)."),
    namespace: str = typer.Option(
        DEFAULT_NAMESPACE, "-n", "--namespace", help="Namespace of objects that name none."
    ),
    output: Output = output_option(),
) -> None:
    """Create or update every object of a (multi-document) YAML file."""
    apply_documents(ctx, file, namespace, output)


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
