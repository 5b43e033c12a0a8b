"""``shoal kube|core|infra|fleet …``: every kind's command group, with the commands of a
kind that differs from the others.

The generic verbs come from ``commands`` (one factory for every kind); the kind-specific
ones add themselves to those groups when their module is imported here: explain, dryrun
and describe of ``shoal kube app``; describe, cordon, uncordon and drain of
``shoal kube cluster``; explain of ``shoal fleet pod``.
"""

from __future__ import annotations

import typer

from shoal.cli import describe, fleet, kube, maintenance, pull
from shoal.cli.commands import KIND_GROUPS, new_group
from shoal.cli.kinds import GROUPS, TABLE

KIND_SPECIFIC = (describe, fleet, kube, maintenance, pull)
"""The modules whose commands join the kinds' groups (importing them adds them)."""


def install(root: typer.Typer) -> None:
    """Add ``shoal kube|core|infra …`` (``shoal kube app explain|dryrun`` come with them)."""
    for group_name, help in GROUPS.items():
        group = new_group(help)
        for entry in TABLE:
            if entry.group == group_name:
                group.add_typer(KIND_GROUPS[entry.kind], name=entry.command)
                for alias in entry.aliases:
                    group.add_typer(KIND_GROUPS[entry.kind], name=alias, hidden=True)
        root.add_typer(group, name=group_name, help=help)
