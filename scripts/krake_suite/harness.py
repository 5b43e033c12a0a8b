"""Krake 1.0.1's functional suite against Shoal: the environment the suite hard-codes, then
one pytest run per module in Krake CI's order (``ansible/integration_tests.yml``).

Run through ``scripts/krake-suite KRAKE_DIR [MODULE...]``. What it sets up, as Krake's CI
has it, and takes down again at the end:

- ``shoal up --tls --no-demo --clusters 2`` on ports of its own, the objects ``shoal up``
  adds for its demo removed (clusters, sample metrics, sample clouds), so that the store
  starts as empty as Krake's; then Krake CI's bootstrap data (``docker/prometheus/bootstrap``
  and ``support/static_metrics.yaml``) loaded with ``shoal apply``;
- rok's configuration as Krake's ``rok.yaml.template`` writes it (namespace
  ``system:admin``), authenticating with a TLS client certificate issued from shoal up's CA;
- ``/home/krake/git/krake`` a link to KRAKE_DIR; ``/home/krake/clusters/config/c1`` and
  ``c2``, kubeconfigs as minikube writes them (context and user ``minikube``, no context
  namespace), each cluster behind a port of its own (its server URL ends in ``:PORT``);
- Prometheus on ``http://prometheus:9090`` scraping Krake's exporter on port 9095.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
HOME = Path("/home/krake")
GIT_LINK = HOME / "git" / "krake"
CLUSTER_CONFIGS = HOME / "clusters" / "config"
CLUSTERS = ("c1", "c2")
PROMETHEUS_HOST, PROMETHEUS_PORT, EXPORTER_PORT = "prometheus", 9090, 9095
TEST_TIMEOUT = 900
FILE_SERVER_PORT = 18510
TOSCA_URLS = f"http://localhost:{FILE_SERVER_PORT}/"
"""Where shoal up reads TOSCA templates and CSAR archives from: the file server the suite
starts (pytest-httpserver, on localhost and ``PYTEST_HTTPSERVER_PORT``)."""
HOSTS = Path("/etc/hosts")

# Krake CI's order, and whether CI passes --minikubeclusters to the module.
MODULES: list[tuple[str, bool]] = [
    ("test_core.py", False),
    ("test_infrastructure_resources.py", False),
    ("test_kubernetes_cluster.py", False),
    ("test_scheduling.py", True),
    ("test_kubernetes_migration.py", True),
    ("test_update.py", True),
    ("test_kubernetes_observer.py", True),
    ("test_hooks.py", True),
    ("test_scripts.py", False),
    ("test_example_applications.py", True),
]

BOOTSTRAP = ("docker/prometheus/bootstrap.yaml.j2", "support/static_metrics.yaml")


# the pure parts (tests/krake/test_suite_harness.py) ------------------------------------


def minikube_kubeconfig(
    cluster: str, server: str, token: str, namespace: str | None = None
) -> dict[str, Any]:
    """A kubeconfig as minikube writes it for ``cluster``: the cluster under its own name,
    context and user ``minikube``, no namespace in the context (kubectl's ``default``)
    unless ``namespace`` (triage only)."""
    context: dict[str, Any] = {"cluster": cluster, "user": "minikube"}
    if namespace is not None:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server}}],
        "contexts": [{"name": "minikube", "context": context}],
        "current-context": "minikube",
        "preferences": {},
        "users": [{"name": "minikube", "user": {"token": token}}],
    }


def rok_config(
    api_url: str, ca: Path, cert: Path, key: Path, user: str = "system:admin"
) -> dict[str, Any]:
    """rok's configuration as Krake's ``rok.yaml.template`` makes it, TLS on; ``user`` is
    also rok's namespace."""
    return {
        "api_url": api_url,
        "user": user,
        "tls": {"enabled": True, "client_ca": str(ca), "client_cert": str(cert),
                "client_key": str(key)},
    }  # fmt: skip


def render_bootstrap(text: str) -> str:
    """Krake's bootstrap template with CI's values (``docker/generate`` does this there)."""
    values = {"{{ prometheus.host }}": PROMETHEUS_HOST,
              "{{ prometheus.port }}": str(PROMETHEUS_PORT)}  # fmt: skip
    for key, value in values.items():
        text = text.replace(key, value)
    if "{{" in text or "{%" in text:
        raise ValueError("the bootstrap template uses values this harness does not know")
    return text


def prometheus_config() -> dict[str, Any]:
    """Prometheus as Krake's ``docker/prometheus/prometheus.yaml.j2``: itself and the exporter."""
    return {
        "global": {"scrape_interval": "10s"},
        "scrape_configs": [
            {"job_name": "prometheus",
             "static_configs": [{"targets": [f"{PROMETHEUS_HOST}:{PROMETHEUS_PORT}"]}]},
            {"job_name": "exporter",
             "static_configs": [{"targets": [f"127.0.0.1:{EXPORTER_PORT}"]}]},
        ],
    }  # fmt: skip


def outbound_policy() -> dict[str, Any]:
    """Where tenants' URLs may go: Krake's Prometheus, and the file server the suite starts on
    ``localhost`` for its TOSCA and CSAR tests. Nothing else on this machine."""
    return {"schemes": ["http", "https"], "hosts": [PROMETHEUS_HOST, "localhost"],
            "networks": [], "public": True}  # fmt: skip


def pytest_command(python: str, module: str, clusters: bool, junit: Path) -> list[str]:
    command = [python, "-m", "pytest", str(GIT_LINK / "rak/functionals/integration" / module),
               "-p", "shoal_krake_cleanup", "-p", "no:cacheprovider", "-rA",
               f"--junitxml={junit}"]  # fmt: skip
    if clusters:
        command += ["--minikubeclusters", *CLUSTERS]
    return command


@dataclass
class Result:
    module: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""


def read_junit(module: str, path: Path) -> Result:
    """Passed, failed (failures and errors) and skipped of one module's junit file."""
    if not path.exists():
        return Result(module, note="no junit file: pytest did not run")
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    result = Result(module)
    for suite in suites:
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        result.failed += failed
        result.skipped += skipped
        result.passed += tests - failed - skipped
    return result


def table(results: list[Result]) -> str:
    width = max([len("module")] + [len(r.module) for r in results])
    lines = [f"{'module':<{width}}  passed  failed  skipped",
             f"{'-' * width}  ------  ------  -------"]  # fmt: skip
    for r in results:
        note = f"  {r.note}" if r.note else ""
        lines.append(f"{r.module:<{width}}  {r.passed:>6}  {r.failed:>6}  {r.skipped:>7}{note}")
    total = Result("total", *(sum(getattr(r, f) for r in results)
                              for f in ("passed", "failed", "skipped")))  # fmt: skip
    lines.append(f"{'total':<{width}}  {total.passed:>6}  {total.failed:>6}  {total.skipped:>7}")
    return "\n".join(lines)


def with_host(hosts: str, address: str, name: str) -> str | None:
    """``hosts`` with a line for ``name``, or None when a line already names it."""
    for line in hosts.splitlines():
        fields = line.split("#", 1)[0].split()
        if name in fields[1:]:
            return None
    return hosts + ("" if hosts.endswith("\n") or not hosts else "\n") + f"{address} {name}\n"


# the environment ------------------------------------------------------------------------


def say(text: str) -> None:
    print(f"krake-suite: {text}", flush=True)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def wait_until(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not ready after {timeout:.0f}s")


class Stack(contextlib.ExitStack):
    """Everything started or changed, undone in reverse order."""

    def process(self, name: str, command: list[str], log: Path, **kw: Any) -> subprocess.Popen:
        out = log.open("wb")
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, **kw)  # fmt: skip
        say(f"started {name} (pid {proc.pid}, log {log})")

        def stop() -> None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            out.close()

        self.callback(stop)
        return proc

    def link(self, link: Path, target: Path) -> None:
        if link.is_symlink() and link.resolve() == target.resolve():
            return
        if link.exists() or link.is_symlink():
            raise RuntimeError(f"{link} exists and is not a link to {target}: move it away first")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        self.callback(link.unlink)

    def file(self, path: Path, text: str) -> None:
        if path.exists() and path.read_text() != text:
            raise RuntimeError(f"{path} exists with other content: move it away first")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.callback(lambda: path.unlink(missing_ok=True))

    def new_files_removed(self, directory: Path) -> None:
        """Files the suite writes in ``directory`` (a test writes a broken kubeconfig
        there) go at the end; those there before stay."""
        directory.mkdir(parents=True, exist_ok=True)
        before = set(directory.iterdir())

        def remove() -> None:
            for path in set(directory.iterdir()) - before:
                if path.is_file():
                    path.unlink()

        self.callback(remove)

    def host(self, address: str, name: str) -> None:
        new = with_host(HOSTS.read_text(), address, name)
        if new is None:
            return
        added = new[len(HOSTS.read_text()):]
        HOSTS.write_text(new)

        def remove() -> None:
            HOSTS.write_text(HOSTS.read_text().replace(added, "", 1))

        self.callback(remove)


def shoal(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shoal.cli.main", *args], env=env,
                          capture_output=True, text=True, cwd=REPO)  # fmt: skip


def krake_python(python: str, code: str, env: dict[str, str]) -> None:
    subprocess.run([python, "-c", code], env=env, check=True)


def set_up(stack: Stack, args: argparse.Namespace, work: Path) -> dict[str, str]:
    """Everything the suite expects; returns the environment its pytest runs in."""
    for port in (args.port, PROMETHEUS_PORT, EXPORTER_PORT, FILE_SERVER_PORT, *args.cluster_ports):
        if not port_free(port):
            raise RuntimeError(f"port {port} is taken: the suite needs it (see --help)")
    data = work / "shoal"
    security = data / "security"
    security.mkdir(parents=True, exist_ok=True)
    (data / "outbound.yaml").write_text(yaml.safe_dump(outbound_policy()))
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("SHOAL_") and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                                        "KUBECONFIG")}  # fmt: skip
    # The file server the suite starts for its TOSCA and CSAR tests listens on localhost.
    shoal_env = {**base, "PYTHONPATH": str(REPO), "SHOAL_TOSCA_URLS": TOSCA_URLS}
    up = [sys.executable, "-m", "shoal.cli.main", "up", "--tls", "--no-demo", "--clusters", "2",
          "--port", str(args.port), "--data-dir", str(data),
          "--metrics-port", str(args.port + 1)]  # fmt: skip
    log = work / "shoal-up.log"
    proc = stack.process("shoal up", up, log, env=shoal_env, cwd=REPO)
    wait_until("shoal up", lambda: proc.poll() is None and "Processes" in log.read_text(), 300)
    if proc.poll() is not None:
        raise RuntimeError(f"shoal up exited, see {log}")
    cli_env = {**shoal_env, "SHOAL_CONFIG": str(security / "config.yaml")}
    issued = shoal("certs", "issue", "system:admin", "--group", "shoal:admins",
                   "--dir", str(security), env=cli_env)  # fmt: skip
    if issued.returncode:
        raise RuntimeError(f"shoal certs issue: {issued.stderr}")
    xdg = work / "xdg"
    xdg.mkdir(exist_ok=True)
    api_url = f"https://127.0.0.1:{args.port}"
    rok = rok_config(api_url, security / "ca.crt", security / "system-admin.crt",
                     security / "system-admin.key", args.rok_namespace)  # fmt: skip
    (xdg / "rok.yaml").write_text(yaml.safe_dump(rok, sort_keys=False))
    krake_env = {**base, "XDG_CONFIG_HOME": str(xdg), "PYTHONPATH": str(HERE),
                 "PATH": f"{Path(args.krake_python).parent}:{base.get('PATH', '/usr/bin:/bin')}",
                 "PYTEST_TIMEOUT": str(TEST_TIMEOUT),
                 "PYTEST_HTTPSERVER_PORT": str(FILE_SERVER_PORT)}  # fmt: skip
    # The store as empty as Krake's: shoal up's demo clusters, metrics and clouds go (the
    # API's own roles stay: they are its security).
    krake_python(args.krake_python, "import shoal_krake_cleanup as c; api = c.Api(); "
                 "left = c.leftovers(set(), {r for r in api.snapshot() if r[1] not in "
                 "('roles', 'rolebindings')}); stuck = api.delete(left); "
                 "assert not stuck, stuck; print('removed', len(left), 'demo objects')",
                 krake_env)  # fmt: skip
    for name in BOOTSTRAP if args.bootstrap else ():
        text = render_bootstrap((args.krake / name).read_text())
        path = work / Path(name).name.removesuffix(".j2")
        path.write_text(text)
        loaded = shoal("apply", "-f", str(path), env=cli_env)
        if loaded.returncode:
            raise RuntimeError(f"bootstrap {name}: {loaded.stdout}{loaded.stderr}")
        say(f"bootstrap {name}: loaded")
    stack.link(GIT_LINK, args.krake)
    stack.new_files_removed(CLUSTER_CONFIGS)
    kube = data / "kubeconfigs"
    for cluster, sim, port in zip(CLUSTERS, ("sim-1", "sim-2"), args.cluster_ports, strict=True):
        config = yaml.safe_load((kube / f"{sim}.yaml").read_text())
        target = config["clusters"][0]["cluster"]["server"]
        token = config["users"][0]["user"]["token"]
        stack.process(f"port {port} for {cluster}",
                      [sys.executable, str(Path(__file__)), "proxy", str(port), target],
                      work / f"proxy-{cluster}.log", env=shoal_env)  # fmt: skip
        kubeconfig = minikube_kubeconfig(cluster, f"http://127.0.0.1:{port}", token,
                                         args.context_namespace)  # fmt: skip
        stack.file(CLUSTER_CONFIGS / cluster, yaml.safe_dump(kubeconfig, sort_keys=False))
        wait_until(f"cluster {cluster} on port {port}", lambda p=port: _answers(p), 60)
    stack.host("127.0.0.1", PROMETHEUS_HOST)
    exporter = args.krake / "docker/prometheus/exporter/exporter.py"
    stack.process("Krake's exporter", [args.krake_python, str(exporter), "--host", "127.0.0.1",
                                       "--port", str(EXPORTER_PORT)],
                  work / "exporter.log", env=krake_env)  # fmt: skip
    prom = work / "prometheus.yml"
    prom.write_text(yaml.safe_dump(prometheus_config()))
    stack.process("Prometheus", [args.prometheus, f"--config.file={prom}",
                                 f"--storage.tsdb.path={work / 'prometheus-data'}",
                                 "--query.lookback-delta=2m",
                                 f"--web.listen-address=0.0.0.0:{PROMETHEUS_PORT}"],
                  work / "prometheus.log")  # fmt: skip
    wait_until("Prometheus scraping the exporter", _exporter_scraped, 120)
    return krake_env


def _answers(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=2)
    except urllib.error.HTTPError:
        return True
    return True


def _exporter_scraped() -> bool:
    import json
    import urllib.request

    url = f"http://{PROMETHEUS_HOST}:{PROMETHEUS_PORT}/api/v1/query?query=heat_demand_zone_1"
    with urllib.request.urlopen(url, timeout=2) as answer:
        return bool(json.load(answer)["data"]["result"])


def run_modules(args: argparse.Namespace, env: dict[str, str], results_dir: Path) -> list[Result]:
    chosen = [m for m in MODULES if not args.modules or m[0] in args.modules]
    results = []
    for module, clusters in chosen:
        stem = module.removesuffix(".py")
        junit, log = results_dir / f"{stem}.xml", results_dir / f"{stem}.log"
        junit.unlink(missing_ok=True)
        command = pytest_command(args.krake_python, module, clusters, junit) + args.pytest_arg
        say(f"{module}: {' '.join(command[2:])} (log {log})")
        started = time.monotonic()
        with log.open("w") as out:
            subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                           cwd=results_dir)  # fmt: skip
        result = read_junit(module, junit)
        results.append(result)
        say(f"{module}: {result.passed} passed, {result.failed} failed, {result.skipped} "
            f"skipped in {time.monotonic() - started:.0f}s")  # fmt: skip
    return results


def main(argv: list[str]) -> int:
    if argv[:1] == ["proxy"]:
        asyncio.run(proxy(int(argv[1]), argv[2]))
        return 0
    parser = argparse.ArgumentParser(prog="scripts/krake-suite")
    parser.add_argument("--krake", type=Path, required=True, help="Krake 1.0.1's repository")
    parser.add_argument("--krake-python", required=True, help="the suite's virtualenv python")
    parser.add_argument("--port", type=int, default=18480,
                        help="shoal up's API port (its components' /metrics on the next ones)")
    parser.add_argument("--cluster-ports", type=int, nargs=2, default=[18501, 18502])
    parser.add_argument("--rok-namespace", default="system:admin",
                        help="rok's namespace (its 'user'); Krake's default unless triaging")
    parser.add_argument("--pytest-arg", action="append", default=[],
                        help="one more argument for every pytest run (repeat): -k=NAME")
    parser.add_argument("--context-namespace", default=None,
                        help="a namespace in the kubeconfigs' context (triage; minikube: none)")
    parser.add_argument("--no-bootstrap", dest="bootstrap", action="store_false",
                        help="do not load Krake CI's bootstrap data (for triage)")
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or "prometheus")
    parser.add_argument("--out", type=Path, default=REPO / "krake-suite-results")
    parser.add_argument("modules", nargs="*", help="modules to run (default: all, CI's order)")
    args = parser.parse_args(argv)
    unknown = set(args.modules) - {m for m, _ in MODULES}
    if unknown:
        parser.error(f"unknown modules: {', '.join(sorted(unknown))}")
    work = args.out.resolve()
    shutil.rmtree(work / "shoal", ignore_errors=True)
    shutil.rmtree(work / "prometheus-data", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    with Stack() as stack:
        stack.enter_context(_signals_stop())
        env = set_up(stack, args, work)
        results = run_modules(args, env, work)
    print(table(results))
    (work / "table.txt").write_text(table(results) + "\n")
    return 0 if all(r.failed == 0 and not r.note for r in results) else 1


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM ends the run as Ctrl-C does, so that everything started is stopped."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# a cluster behind a port of its own ------------------------------------------------------

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "proxy-authenticate", "host", "content-length"}  # fmt: skip


async def proxy(port: int, target: str) -> None:
    """Serve ``target`` (a simulated cluster's URL, ``.../clusters/NAME``) on ``port``'s root,
    streaming answers (watches)."""
    import aiohttp
    from aiohttp import web

    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                    auto_decompress=False)  # fmt: skip

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        body = await request.read()
        async with session.request(request.method, target + request.path_qs, headers=headers,
                                   data=body or None, allow_redirects=False) as answer:  # fmt: skip
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for key, value in answer.headers.items():
                if key.lower() not in HOP:
                    response.headers.add(key, value)
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await asyncio.Event().wait()
    finally:
        await session.close()
        await runner.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
