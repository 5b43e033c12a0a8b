"""``scripts/krake-suite``'s own parts, checked without Krake's copy: the kubeconfig it writes
for each cluster (minikube's shape, behind a port of its own, read by kubectl), the cleanup
plugin's choice and order of leftovers, its skips, and the result table."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from shoal.machinery.ports import free_port
from shoal.sim.server import SimServer
from shoal.testing.wait import wait_for

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "krake_suite"
KUBECTL = shutil.which("kubectl")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


harness = _load("harness")
cleanup = _load("shoal_krake_cleanup")


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """The one cluster Krake's functional suite names."""
    return dict(clusters=["sim-1"], nodes=2, pod_start_delay=0.1)


async def _kubectl(kubeconfig: Path, home: Path, *args: str) -> str:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.integration
async def test_cluster_behind_its_own_port_as_minikube_writes_it(
    sim: SimServer, tmp_path: Path
) -> None:
    """kubectl reaches the simulated cluster at ``http://127.0.0.1:PORT`` (no path), through
    context and user ``minikube``; an object without namespace lands in ``default``."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    source = sim.kubeconfig("sim-1")
    port = free_port()
    proxy = asyncio.create_task(harness.proxy(port, source["clusters"][0]["cluster"]["server"]))
    try:
        config = harness.minikube_kubeconfig(
            "c1", f"http://127.0.0.1:{port}", source["users"][0]["user"]["token"]
        )
        assert config["current-context"] == "minikube"
        assert config["contexts"] == [
            {"name": "minikube", "context": {"cluster": "c1", "user": "minikube"}}
        ]
        assert config["clusters"][0]["cluster"]["server"].endswith(f":{port}")
        path = tmp_path / "c1"
        path.write_text(yaml.safe_dump(config))

        async def answers() -> bool:
            try:
                await _kubectl(path, tmp_path, "get", "nodes", "-o", "name")
            except AssertionError:
                return False
            return True

        await wait_for(answers, timeout=30, message="the cluster behind its port")
        nodes = await _kubectl(path, tmp_path, "get", "nodes", "-o", "name")
        assert len(nodes.split()) == 2
        await _kubectl(path, tmp_path, "create", "configmap", "probe", "--from-literal=a=b")
        cluster = sim.clusters.cluster("sim-1")
        found = cluster.store.get("/configmaps", "default", "probe")
        assert found is not None and found["data"] == {"a": "b"}
    finally:
        proxy.cancel()
        with pytest.raises(asyncio.CancelledError):
            await proxy


def test_leftovers_are_what_a_test_added_applications_first() -> None:
    before = {("core", "globalmetrics", None, "heat_demand_zone_1"),
              ("core", "roles", None, "shoal:admin")}  # fmt: skip
    after = before | {
        ("core", "globalmetricsproviders", None, "mp"),
        ("kubernetes", "clusters", "system:admin", "c1"),
        ("core", "globalmetrics", None, "m"),
        ("kubernetes", "applications", "system:admin", "echo-demo"),
        ("core", "roles", None, "e2e_test_role"),
    }
    assert cleanup.leftovers(before, after) == [
        ("kubernetes", "applications", "system:admin", "echo-demo"),
        ("kubernetes", "clusters", "system:admin", "c1"),
        ("core", "globalmetrics", None, "m"),
        ("core", "globalmetricsproviders", None, "mp"),
        ("core", "roles", None, "e2e_test_role"),
    ]
    assert cleanup.leftovers(after, after) == []


def test_leftovers_are_deleted_on_krakes_routes() -> None:
    listing = {"items": [{"metadata": {"name": "c1", "namespace": "system:admin"}}]}
    refs = cleanup.refs_of("kubernetes", "clusters", True, listing)
    assert refs == {("kubernetes", "clusters", "system:admin", "c1")}
    assert cleanup.item_path(next(iter(refs))) == "/kubernetes/namespaces/system:admin/clusters/c1"
    assert cleanup.item_path(("core", "roles", None, "r")) == "/core/roles/r"
    assert cleanup.list_path("core", "metrics") == "/core/metrics"


def test_skips_only_what_this_machine_cannot_give() -> None:
    base = "/home/krake/git/krake/rak/functionals/integration"
    assert "Docker" in cleanup.skip_reason(f"{base}/test_scripts.py")
    assert "Docker" in cleanup.skip_reason(f"{base}/test_scripts.py::test_generate")
    openstack = cleanup.skip_reason(f"{base}/test_kubernetes_cluster.py::test_cluster_crud")
    assert "OpenStack" in openstack
    assert "containers" in cleanup.skip_reason(f"{base}/test_hooks.py::test_complete_hook")
    assert cleanup.skip_reason(f"{base}/test_kubernetes_cluster.py") is None
    assert cleanup.skip_reason(f"{base}/test_update.py::test_update_no_changes_tosca[url]") is None
    for reason in cleanup.SKIPS.values():
        assert "\n" not in reason and any(
            need in reason for need in ("OpenStack", "Docker", "containers", "outside")
        )


def test_bootstrap_template_gets_ci_values() -> None:
    text = "url: http://{{ prometheus.host }}:{{ prometheus.port }}\n"
    assert harness.render_bootstrap(text) == "url: http://prometheus:9090\n"
    with pytest.raises(ValueError, match="does not know"):
        harness.render_bootstrap("url: {{ other.host }}")


def test_hosts_line_added_only_when_absent() -> None:
    assert harness.with_host("127.0.0.1 localhost\n", "127.0.0.1", "prometheus") == (
        "127.0.0.1 localhost\n127.0.0.1 prometheus\n"
    )
    assert harness.with_host("10.0.0.5 prometheus  # mine\n", "127.0.0.1", "prometheus") is None
    assert harness.with_host("# 1.2.3.4 prometheus\n", "127.0.0.1", "prometheus") is not None


def test_table_counts_failures_and_errors_as_failed(tmp_path: Path) -> None:
    junit = tmp_path / "m.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" tests="7" failures="2" errors="1" skipped="1">'
        "</testsuite></testsuites>"
    )
    result = harness.read_junit("test_m.py", junit)
    assert (result.passed, result.failed, result.skipped) == (3, 3, 1)
    missing = harness.read_junit("test_n.py", tmp_path / "none.xml")
    assert missing.note and missing.passed == missing.failed == 0
    lines = harness.table([result, missing]).splitlines()
    assert lines[2].split() == ["test_m.py", "3", "3", "1"]
    assert lines[-1].split() == ["total", "3", "3", "1"]


def test_modules_in_krake_cis_order_with_clusters_where_ci_passes_them(tmp_path: Path) -> None:
    names = [m for m, _ in harness.MODULES]
    assert names[:3] == ["test_core.py", "test_infrastructure_resources.py",
                         "test_kubernetes_cluster.py"]  # fmt: skip
    assert names.index("test_kubernetes_migration.py") < names.index("test_update.py")
    command = harness.pytest_command("py", "test_update.py", True, tmp_path / "j.xml")
    assert command[-3:] == ["--minikubeclusters", "c1", "c2"]
    assert "shoal_krake_cleanup" in command
    assert "--minikubeclusters" not in harness.pytest_command("py", "test_core.py", False, tmp_path)
