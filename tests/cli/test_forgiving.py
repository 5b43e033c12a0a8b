"""What a newcomer meets in the first hour, through the CLI: exit codes and the words on stderr."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from shoal.api.server import ApiServer
from shoal.cli import complete as complete_names
from shoal.cli.main import app
from shoal.client.rest import ShoalClient
from shoal.model.base import Metadata
from shoal.model.core import GlobalMetricsProvider
from shoal.model.kubernetes import Application
from shoal.model.scheduling import RescheduleTask
from shoal.testing import builders, shipped
from shoal.testing.builders import kubeconfig
from shoal.testing.shipped import Callers
from tests.cli.conftest import Shoal, cli, cli_ok, invoke, ok
from tests.util import serving

MANIFEST = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"


@pytest.fixture
def manifest(tmp_path: Path) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST)
    return str(path)


# names -----------------------------------------------------------------------------


async def test_misspelt_kind_suggests_the_kind(shoal: Shoal) -> None:
    result = await cli(shoal, "get aplications")
    assert result.exit_code == 1
    assert "unknown kind 'aplications' (did you mean 'applications'" in result.stderr
    assert "rolebindings" not in result.stderr  # no list of every kind when one is close


async def test_misspelt_command_suggests_the_command(shoal: Shoal) -> None:
    result = await cli(shoal, "kube ap list")
    assert result.exit_code == 2
    assert "No such command 'ap'. (did you mean 'app'?)" in result.output
    top = await cli(shoal, "gett apps")
    assert top.exit_code == 2
    assert "(did you mean 'get'" in top.stderr


async def test_misspelt_name_suggests_the_name(shoal: Shoal, manifest: str) -> None:
    await cli_ok(shoal, f"kube app create web -f {manifest}")
    for line in ("get app wbe", "kube app get wbe", "delete app wbe"):
        result = await cli(shoal, line)
        assert result.exit_code == 1, line
        assert "Application 'wbe' not found in namespace 'default'" in result.stderr
        assert "(did you mean 'web'?)" in result.stderr


async def test_duplicate_create_names_the_object(shoal: Shoal, manifest: str) -> None:
    await cli_ok(shoal, f"kube app create web -f {manifest}")
    result = await cli(shoal, f"kube app create web -f {manifest}")
    assert result.exit_code == 1
    assert "Application 'web' already exists in namespace 'default'" in result.stderr
    assert "/kubernetes/applications" not in result.stderr  # not the store's key
    gm = "core gm create g --min 0 --max 1 --mp-name p --metric-name m"
    await cli_ok(shoal, gm)
    again = await cli(shoal, gm)
    assert "GlobalMetric 'g' already exists\n" in again.stderr


# servers that are not Shoal ------------------------------------------------------------


class _NotShoal(BaseHTTPRequestHandler):
    body = b"<html><body>It works!</body></html>"

    def do_GET(self) -> None:
        status = 200 if self.path == "/" else 404
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_shoal() -> Iterator[str]:
    with serving(_NotShoal) as url:
        yield url


async def test_a_server_that_is_not_shoal(not_shoal: str, manifest: str) -> None:
    expected = f"{not_shoal} is not a Shoal API: it answered 404 to /healthz"
    for args in (
        ["get", "clusters"],
        ["kube", "app", "get", "web"],
        ["kube", "app", "create", "web", "-f", manifest],
    ):
        result = await invoke("--api", not_shoal, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip() == expected, args
        assert "<html>" not in result.output


def test_a_server_that_answers_200_is_told_apart() -> None:
    """A 200 with another body: the message says what came back, not a contradiction."""
    from shoal.cli.errors import not_shoal

    text = str(not_shoal("http://x", 200, body=b"<html>welcome</html>"))
    assert "answered /healthz with '<html>welcome</html>'" in text
    assert '{"status": "ok"}' in text


def test_unauthorized_names_where_the_token_comes_from() -> None:
    from shoal.cli.errors import problem_message

    text = problem_message(401, {"title": "UNAUTHORIZED", "detail": "no credentials"})
    assert "$SHOAL_TOKEN" in text and "token:" in text


# YAML, tracebacks -------------------------------------------------------------------


async def test_yaml_errors_name_the_file_and_line(shoal: Shoal, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\ndata: [\n")
    result = await cli(shoal, f"kube app create web -f {broken}")
    assert result.exit_code == 1
    assert f"{broken}, line " in result.stderr
    assert "<unicode string>" not in result.stderr
    applied = await cli(shoal, f"apply -f {broken}")
    assert f"{broken}, line " in applied.stderr


async def test_one_line_unless_debug(not_shoal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_SIM", not_shoal)
    plain = await invoke("sim", "list")
    assert plain.exit_code != 0
    assert "Traceback" not in plain.output
    assert len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    debug = await invoke("--api", "http://127.0.0.1:1", "--debug", "get", "clusters")
    assert debug.exit_code == 2
    assert "Traceback" in debug.stderr and "cannot reach the Shoal API" in debug.stderr


# small verbs -----------------------------------------------------------------------


async def test_dryrun_of_an_existing_application(
    shoal: Shoal, manifest: str, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig.yaml"
    config.write_text(yaml.safe_dump(kubeconfig("de-1")))
    await cli_ok(shoal, f"kube cluster register de-1 -l location=DE --kubeconfig {config}")
    await cli_ok(shoal, f"kube app create web -f {manifest} -L 'location is FR'")
    result = ok(await cli(shoal, "kube app dryrun web -o json"))
    assert json.loads(result.output)["summary"].startswith("0/1 clusters available")
    what_if = ok(await cli(shoal, "kube app dryrun web -L 'location is DE'"))
    assert "dry run of web" in what_if.output
    missing = await cli(shoal, "kube app dryrun")
    assert missing.exit_code == 1
    assert "give the NAME of an application, or -f FILE" in missing.stderr


async def test_set_and_unset_one_static_metric(shoal: Shoal, client: ShoalClient) -> None:
    await cli_ok(shoal, "core gmp create fixed --type static --metric load 0.4 --metric price 3")
    await cli_ok(shoal, "core gmp update fixed --set-metric load=0.5 --set-metric heat 7")
    await cli_ok(shoal, "core gmp update fixed --unset-metric price")
    provider = await client.get(GlobalMetricsProvider, "fixed")
    assert provider.spec.static is not None
    assert provider.spec.static.metrics == {"load": 0.5, "heat": 7.0}
    wrong = await cli(shoal, "core gmp update fixed --unset-metric laod")
    assert wrong.exit_code == 1
    assert "the provider has no metric 'laod' (did you mean 'load'?)" in wrong.stderr


async def test_ages_in_tables_and_full_times_wide(shoal: Shoal, client: ShoalClient) -> None:
    task = await client.create(
        RescheduleTask.model_validate(
            {"metadata": {"name": "t"}, "spec": {"target_clusters": ["default/none"]}}
        )
    )
    task.status.finish_time = task.metadata.created
    await client.update_status(task)
    table = ok(await cli(shoal, "get rescheduletasks"))
    header, row = table.output.splitlines()[:2]
    finished = row[header.index("FINISHED") :].split()[0]
    assert finished.endswith("s") and finished[:-1].isdigit(), row
    wide = ok(await cli(shoal, "get rescheduletasks -o wide"))
    assert str(task.metadata.created.year) in wide.output


# the namespace hint -----------------------------------------------------------------


async def test_no_clusters_in_the_namespace(
    shoal: Shoal, client: ShoalClient, client_of: Callers, manifest: str
) -> None:
    from shoal.model.kubernetes import Cluster, ClusterSpec
    from shoal.scheduler.scheduler import Scheduler
    from tests.util import wait_for

    for name in ("a", "b", "c"):
        await client.create(
            Cluster(
                metadata=Metadata(name=name, namespace="default"),
                spec=ClusterSpec(kubeconfig=kubeconfig(name)),
            )
        )
    scheduler = Scheduler(client_of("scheduler"))
    await scheduler.start()
    try:
        await cli_ok(shoal, f"kube app create web -n prod -f {manifest}")

        async def explained() -> str | None:
            app = await client.get(Application, "web", "prod")
            return (app.status.scheduling or {}).get("summary")

        summary = await wait_for(explained, message="web explained")
        expected = (
            "no clusters in namespace 'prod' (clusters are per namespace: register one in 'prod')"
        )
        assert "default" not in expected  # other tenants' namespaces are never named
        assert summary == expected
        result = await cli(shoal, "kube app explain web -n prod -o json")
        assert json.loads(result.output)["summary"] == expected
    finally:
        await scheduler.stop()
        await scheduler.client.close()


# start-up -------------------------------------------------------------------------

HEAVY = (
    "shoal.scheduler",
    "shoal.store",
    "shoal.sim",
    "shoal.kube",
    "shoal.api",
    "shoal.client.rest",
    "shoal.model.kubernetes",
    "kubernetes_asyncio",
    "aiohttp",
    "pydantic",
    "typer",
)


async def test_a_plain_get_imports_nothing_heavy(api: ApiServer) -> None:
    """``shoal get clusters`` stays fast: no scheduler, store, simulator, Kubernetes client,
    server, model or async client is imported (the CLI's start-up benchmark is bench/cli.py)."""
    code = (
        "import sys\n"
        "from shoal.cli.main import main\n"
        f"sys.argv = ['shoal', '--api', {api.url!r}, 'get', 'clusters']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
        "print('HEAVY', heavy)\n"
    )
    admin = {**os.environ, "SHOAL_TOKEN": shipped.token(shipped.ADMIN)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=admin
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "HEAVY []" in out.decode(), out.decode()


# completion ------------------------------------------------------------------------


async def _complete(url: str, line: str) -> list[str]:
    """What the shell's completion offers for ``line`` (click's bash protocol)."""
    words = f"shoal --api {url} {line}"
    env = {
        "_SHOAL_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    result = await asyncio.to_thread(CliRunner().invoke, app, [], env=env, prog_name="shoal")
    return [line.split(",", 1)[1] for line in result.output.splitlines() if line]


async def test_completion_of_kinds_namespaces_and_names(
    api: ApiServer, shoal: Shoal, manifest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Completion gives the API one second, then offers nothing (the next test). This
    # API shares the test's event loop and a busy machine: the test waits on the answer.
    monkeypatch.setattr(complete_names, "TIMEOUT", 30.0)
    await cli_ok(shoal, f"kube app create web -f {manifest}")
    await cli_ok(shoal, f"kube app create worker -n prod -f {manifest}")

    async def complete(line: str) -> list[str]:
        return await _complete(api.url, line)

    assert "applications" in await complete("get appl")
    assert await complete("get app w") == ["web"]
    assert await complete("get app -n prod w") == ["worker"]
    assert "prod" in await complete("get app -n ")
    assert await complete("kube app get w") == ["web"]
    assert "app" in await complete("kube a")


async def test_completion_without_an_api_offers_names_of_kinds_only() -> None:
    """A shell's completion never hangs on an absent API: it offers no names, at once."""
    from tests.util import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert await _complete(url, "get app w") == []
    assert "applications" in await _complete(url, "get appl")


async def test_an_unreachable_krake_is_named(shoal: Shoal) -> None:
    """``import --from-krake`` with no Krake there blames the Krake URL, not Shoal's API."""
    from tests.util import free_port

    krake = f"http://127.0.0.1:{free_port()}"
    result = await shoal("import", "--from-krake", krake)
    assert result.exit_code == 2, result.output
    assert f"cannot reach the Krake API at {krake}" in result.stderr
    assert "Shoal API" not in result.stderr


async def test_completion_of_names_for_describe_explain_reschedule_and_cluster_verbs(
    api: ApiServer, shoal: Shoal, manifest: str, client: ShoalClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(complete_names, "TIMEOUT", 30.0)
    await cli_ok(shoal, f"kube app create web -f {manifest}")
    await cli_ok(shoal, f"kube app create worker -n prod -f {manifest}")
    await client.create(builders.cluster("edge-1"))

    async def complete(line: str) -> list[str]:
        return await _complete(api.url, line)

    assert sorted(await complete("describe ap")) == ["app", "application", "applications", "apps"]
    assert await complete("describe app w") == ["web"]
    assert await complete("describe cluster e") == ["edge-1"]
    assert await complete("describe app -n prod w") == ["worker"]
    assert await complete("kube app describe w") == ["web"]
    assert await complete("kube app explain w") == ["web"]
    assert await complete("kube app explain -n prod w") == ["worker"]
    assert await complete("kube app retry w") == ["web"]
    assert await complete("reschedule app w") == ["web"]
    assert await complete("reschedule app web w") == ["web"]
    assert await complete("kube cluster describe e") == ["edge-1"]
    assert await complete("kube cluster drain e") == ["edge-1"]
    assert "prod" in await complete("kube cluster describe -n ")
