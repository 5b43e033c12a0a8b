"""docs/cli.md lists every command of the tree, so the docs cannot fall behind the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from shoal.cli.main import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands() -> list[str]:
    """Every visible command that runs something, as ``shoal PATH``."""
    ctx = click.Context(app)
    found: list[str] = []

    def walk(group: Any, path: list[str]) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or getattr(command, "hidden", False):
                continue
            if hasattr(command, "_typer_command"):
                command = command._typer_command()  # a typer group, loaded on use
            is_group = hasattr(command, "list_commands")
            if not is_group or getattr(command, "invoke_without_command", False):
                found.append("shoal " + " ".join([*path, name]))
            if is_group:
                walk(command, [*path, name])

    walk(app, [])
    return found


def test_docs_list_every_command() -> None:
    text = DOC.read_text()
    listed = [line.split("  ")[0].strip() for line in text.splitlines()]
    missing = [c for c in commands() if c not in listed]
    assert not missing, f"add to docs/cli.md's 'Every command': {missing}"
    assert len(commands()) > 60
