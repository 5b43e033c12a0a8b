"""The ``shoal`` command: root app, and the place to plug in groups, each loaded when used.

Starting a command costs only what it uses: the root knows every group's
name and one-line help from ``EXTENSIONS`` and imports a module when one of
its commands runs (``shoal get`` imports no model, client or server module;
``shoal up`` imports the servers). Other modules add their commands by:

* an entry in ``EXTENSIONS``: the module, a group name, and the commands it
  adds with their one-line help. The module has ``def install(root: typer.Typer)``
  (``register`` works too) that calls ``root.add_typer(...)`` or ``root.command(...)``,
  or a module-level ``app = typer.Typer()`` that becomes ``shoal <group name>``; or
* ``shoal.cli.main.add_group(sub_app, "name", "help")`` / ``add_command(fn, "name")``
  from code that imports this module; or
* a ``shoal.cli`` entry point ``name = "package.module:install"`` (loaded when
  a command is not found otherwise; not listed by ``shoal --help``).

Names reserved for other modules: ``api``, ``up``, ``scheduler``, ``sim``,
``kube-controller``, ``reschedule``, ``agent``, ``gc``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from shoal.cli import generic
from shoal.cli.config import CliState
from shoal.cli.handling import FriendlyGroup, errors_handled

HELP = "Shoal: place applications on a fleet of Kubernetes clusters."


@dataclass(frozen=True)
class Extension:
    """A module that adds commands: its group name (for an ``app``) and each command's help."""

    module: str
    group: str | None
    commands: dict[str, str]


EXTENSIONS: list[Extension] = [
    Extension(
        "shoal.cli.kind_commands",
        None,
        {
            "kube": "Applications and clusters (kubernetes).",
            "core": "Metrics, metrics providers, roles and role bindings (core).",
            "infra": "Clouds that clusters are created on (infrastructure).",
            "fleet": "Pods placed onto nodes across the fleet by cluster agents (scheduling).",
        },
    ),
    Extension(
        "shoal.cli.run",
        None,
        {
            "api": "Run the API server alone.",
            "scheduler": "Run the scheduler alone against an API.",
            "kube-controller": "Run the Kubernetes application controller alone.",
            "cluster-observer": "Run the cluster observer alone.",
            "garbage-collector": "Run the garbage collector alone.",
            "reschedule-controller": "Run the RescheduleTask controller alone.",
            "infrastructure-controller": "Run the infrastructure controller alone (clusters "
            "built on clouds).",
            "up": "Start Shoal with embedded defaults: API, every controller, a sim fleet, "
            "sample metrics.",
        },
    ),
    Extension(
        "shoal.sim.cli",
        "sim",
        {"sim": "Simulated Kubernetes clusters (like KWOK) for demos, tests and benchmarks."},
    ),
    Extension(
        "shoal.cli.agent",
        None,
        {"agent": "Run the cluster agent of one cluster (fleet pods: sample and commit)."},
    ),
    Extension(
        "shoal.cli.pull",
        None,
        {"join": "Join a hub in pull mode with a token and run this cluster's agent."},
    ),
    Extension(
        "shoal.cli.reschedule",
        "reschedule",
        {
            "reschedule": "Reschedule applications now, ignoring stickiness "
            "(creates a RescheduleTask)."
        },
    ),
    Extension(
        "shoal.cli.check",
        None,
        {"check": "List stored objects that the API's rules would now refuse, and why."},
    ),
    Extension(
        "shoal.cli.about",
        None,
        {
            "version": "Print the version of the shoal command.",
            "describe": "The describe page of an application or a cluster (KIND NAME).",
        },
    ),
    Extension(
        "shoal.cli.import_krake",
        None,
        {"import": "Copy a Krake installation into Shoal (--from-krake URL)."},
    ),
    Extension(
        "shoal.cli.security",
        None,
        {
            "certs": "Make a CA and component certificates for a development set-up.",
            "secrets": "Keys that encrypt secret fields at rest (new key, re-encrypt).",
        },
    ),
]
"""Modules that plug commands in, imported when one of their commands is used."""

ADDED: dict[str, Any] = {}
"""Typer apps and functions given to ``add_group``/``add_command``, by name."""


class Typed(click.Command):
    """A command of the typer world (typer vendors its own click), run when invoked.

    The root is plain click so that ``shoal get`` never pays for typer's
    parameter machinery (pydantic); the groups written with typer get the
    rest of the command line, the root's state and its completion.
    """

    def __init__(self, name: str, help: str, load: Callable[[], Any]) -> None:
        super().__init__(
            name,
            help=help,
            add_help_option=False,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        self.load = load

    def _typer_command(self) -> Any:
        import typer

        loaded = self.load()
        return typer.main.get_command(loaded) if isinstance(loaded, typer.Typer) else loaded

    def invoke(self, ctx: click.Context) -> Any:
        with errors_handled():  # groups written with plain typer (shoal sim) fail in one line too
            command = self._typer_command()
            return command.main(
                args=list(ctx.args), prog_name=ctx.command_path, obj=ctx.find_root().obj
            )

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem
        from typer._click.shell_completion import _resolve_context, _resolve_incomplete

        args = list(ctx.args)
        root = ctx.find_root()
        state = root.obj or CliState(api=root.params.get("api"))  # no callback ran
        obj = {"obj": state}
        sub = _resolve_context(self._typer_command(), obj, ctx.command_path, args)
        target, incomplete = _resolve_incomplete(sub, args, incomplete)
        found = target.shell_complete(sub, incomplete)
        return [CompletionItem(item.value, help=item.help) for item in found]


class Root(FriendlyGroup, click.Group):
    """The root: the generic verbs are here; every other command is loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(self.commands)
        for extension in EXTENSIONS:
            names.extend(n for n in extension.commands if n not in names)
        names.extend(n for n in ADDED if n not in names)
        return names  # not the plugins': scanning entry points would double --help's time

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = self.commands.get(name)
        if found is not None:
            return found
        if name in ADDED:
            return Typed(name, "", lambda: ADDED[name])
        extension = next((e for e in EXTENSIONS if name in e.commands), None)
        if extension is not None:
            module, group = extension.module, extension.group
            help = extension.commands[name]
            return Typed(name, help, lambda: _load(module, group)[name])
        plugins = _plugins()
        if name in plugins:
            return Typed(name, "", lambda: plugins[name])
        return None


@click.group(
    cls=Root,
    name="shoal",
    help=HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--api",
    metavar="URL",
    help="Shoal API URL (default: $SHOAL_API, then 'api:' in "
    "~/.config/shoal/config.yaml or $SHOAL_CONFIG, then http://127.0.0.1:8080).",
)
@click.option(
    "--debug", is_flag=True, help="Print the traceback of an error (also $SHOAL_DEBUG=1)."
)
@click.pass_context
def app(ctx: click.Context, api: str | None, debug: bool) -> None:
    """Shoal: place applications on a fleet of Kubernetes clusters."""
    ctx.obj = CliState(api=api, debug=debug)


generic.install(app)
app.add_command(generic.completion_command())


def add_group(sub: Any, name: str, help: str | None = None, hidden: bool = False) -> None:
    """Add a typer app as a command group (``shoal NAME ...``)."""
    ADDED[name] = sub


def add_command(function: Callable[..., Any], name: str, help: str | None = None) -> None:
    """Add one function as a typer command (``shoal NAME``)."""
    import typer

    single = typer.Typer(rich_markup_mode=None)
    single.command(name, help=help)(function)
    ADDED[name] = single


def _log() -> Any:
    import logging  # only when there is something to say

    return logging.getLogger(__name__)


def _install(target: Any, module_name: str, name: str | None) -> None:
    """Let a module add its commands to ``target``; a broken module is logged, not fatal."""
    import typer

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            return  # that module is not written (yet)
        _log().warning("shoal: commands of %s unavailable: %s", module_name, error)
        return
    except Exception as error:  # a module in the making must not break every command
        _log().warning("shoal: commands of %s unavailable: %r", module_name, error)
        return
    hook = getattr(module, "install", None) or getattr(module, "register", None)
    if callable(hook):
        hook(target)
    elif name is not None and isinstance(getattr(module, "app", None), typer.Typer):
        target.add_typer(module.app, name=name)


def _commands(scratch: Any) -> dict[str, Any]:
    import typer

    if not (scratch.registered_commands or scratch.registered_groups):
        return {}
    return dict(typer.main.get_group(scratch).commands)


_LOADED: dict[str, dict[str, Any]] = {}


def _load(module_name: str, name: str | None) -> dict[str, Any]:
    """The (typer) commands a module adds, built once on a scratch app."""
    import typer

    if module_name not in _LOADED:
        scratch = typer.Typer(rich_markup_mode=None)  # plain help: see _load
        _install(scratch, module_name, name)
        _LOADED[module_name] = _commands(scratch)
    return _LOADED[module_name]


def _plugins() -> dict[str, Any]:
    """The commands of ``shoal.cli`` entry points (third-party plugins), by name."""
    import importlib.metadata

    entries = importlib.metadata.entry_points(group="shoal.cli")
    if not entries:
        return {}
    import typer

    found: dict[str, Any] = {}
    for entry in entries:
        scratch = typer.Typer(rich_markup_mode=None)  # plain help: see _load
        try:
            entry.load()(scratch)
            found.update(_commands(scratch))
        except Exception:  # a broken third-party plugin must not break the CLI
            _log().warning("shoal: cannot load plugin %s", entry.value, exc_info=True)
    return found


def main() -> None:
    """Console entry point ``shoal``."""
    app(prog_name="shoal")


if __name__ == "__main__":
    main()
