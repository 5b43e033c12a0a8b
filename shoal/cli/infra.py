"""``shoal infra``: OpenStack clouds that clusters are created on (``rok infra``)."""

from __future__ import annotations

from typing import Any

import typer

from shoal.cli.common import (
    Output,
    add_read_commands,
    apply_labels,
    create_object,
    metric_refs,
    new_group,
    new_object,
    output_option,
    parse_labels,
    update_object,
)
from shoal.model.base import Kind
from shoal.model.infrastructure import Cloud, GlobalCloud

app = new_group("Clouds that clusters are created on (group infrastructure).")

LABEL_HELP = "Label KEY=VALUE (repeatable; on update KEY- removes it)."


def _change_cloud(
    data: dict[str, Any],
    *,
    labels: list[str] | None,
    url: str | None,
    username: str | None,
    password: str | None,
    user_domain: str | None,
    project: str | None,
    project_domain: str | None,
    metrics: list[str] | None,
    global_metrics: list[str] | None,
    infrastructure_provider: str | None,
) -> None:
    apply_labels(data["metadata"], parse_labels(labels))
    spec = data.setdefault("spec", {})
    spec["type"] = "openstack"
    openstack = spec.setdefault("openstack", {})
    if url is not None:
        openstack["url"] = url
    auth = openstack.setdefault("auth", {"type": "password"})
    password_auth = auth.setdefault("password", {})
    user = password_auth.setdefault("user", {})
    for key, value in (
        ("username", username),
        ("password", password),
        ("domain_name", user_domain),
    ):
        if value is not None:
            user[key] = value
    project_section = password_auth.setdefault("project", {})
    for key, value in (("name", project), ("domain_id", project_domain)):
        if value is not None:
            project_section[key] = value
    refs = metric_refs(global_metrics, metrics)
    if refs is not None:
        openstack["metrics"] = refs
    if infrastructure_provider is not None:
        openstack["infrastructure_provider"] = {
            "name": infrastructure_provider,
            "namespaced": False,
        }


def cloud_commands(kind: type[Kind], what: str) -> typer.Typer:
    group = new_group(f"{what.capitalize()}: register, list, get, update, delete.")
    hide_ns = not kind.namespaced

    @group.command("register", help=f"Register an OpenStack {kind.kind_name()}.")
    def register(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Cloud name."),
        url: str = typer.Option(..., "--url", help="Keystone (identity) URL."),
        username: str = typer.Option(..., "--username", "--user", help="OpenStack user."),
        password: str = typer.Option(..., "--password", help="OpenStack password."),
        project: str = typer.Option(..., "--project", help="OpenStack project name."),
        user_domain: str | None = typer.Option(
            None, "--user-domain-name", help="User domain (default: Default)."
        ),
        project_domain: str | None = typer.Option(
            None, "--project-domain-id", help="Project domain id (default: default)."
        ),
        metrics: list[str] | None = typer.Option(
            None, "--metric", help="Namespaced metric: --metric NAME WEIGHT (repeatable)."
        ),
        global_metrics: list[str] | None = typer.Option(
            None, "--global-metric", help="Global metric: --global-metric NAME WEIGHT."
        ),
        infrastructure_provider: str | None = typer.Option(
            None, "--infrastructure-provider", help="Global infrastructure provider name."
        ),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        data = new_object(kind, name, namespace, {})
        _change_cloud(
            data,
            labels=labels,
            url=url,
            username=username,
            password=password,
            user_domain=user_domain,
            project=project,
            project_domain=project_domain,
            metrics=metrics,
            global_metrics=global_metrics,
            infrastructure_provider=infrastructure_provider,
        )
        create_object(ctx, data, kind, output)

    @group.command("update", help=f"Change a {kind.kind_name()}: only given flags change it.")
    def update(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Cloud name."),
        url: str | None = typer.Option(None, "--url"),
        username: str | None = typer.Option(None, "--username", "--user"),
        password: str | None = typer.Option(None, "--password"),
        project: str | None = typer.Option(None, "--project"),
        user_domain: str | None = typer.Option(None, "--user-domain-name"),
        project_domain: str | None = typer.Option(None, "--project-domain-id"),
        metrics: list[str] | None = typer.Option(
            None, "--metric", help="Metrics (given metrics replace all)."
        ),
        global_metrics: list[str] | None = typer.Option(None, "--global-metric"),
        infrastructure_provider: str | None = typer.Option(None, "--infrastructure-provider"),
        namespace: str = typer.Option("default", "-n", "--namespace", hidden=hide_ns),
        labels: list[str] | None = typer.Option(None, "-l", "--label", help=LABEL_HELP),
        output: Output = output_option(),
    ) -> None:
        def change(data: dict[str, Any]) -> None:
            _change_cloud(
                data,
                labels=labels,
                url=url,
                username=username,
                password=password,
                user_domain=user_domain,
                project=project,
                project_domain=project_domain,
                metrics=metrics,
                global_metrics=global_metrics,
                infrastructure_provider=infrastructure_provider,
            )

        update_object(ctx, kind, name, namespace, change, output)

    add_read_commands(group, kind, what)
    return group


app.add_typer(cloud_commands(GlobalCloud, "global clouds"), name="gc")
app.add_typer(cloud_commands(GlobalCloud, "global clouds"), name="globalcloud", hidden=True)
app.add_typer(cloud_commands(Cloud, "clouds"), name="cloud")

__all__ = ["app", "cloud_commands"]
