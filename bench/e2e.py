"""From create to running: applications RUNNING per second on ``shoal sim`` clusters.

N one-replica Deployments (small requests) are created at once by 16 clients
on C sim clusters of M nodes, paired by a label (``group=gK``: clusters 2K and
2K+1) so the load spreads over half the clusters; a static metric prefers the
first of each pair. A watch on applications (raw JSON) records when each one is
bound (``status.scheduled_to``) and RUNNING where it is bound
(``status.running_on``); the create time is the client's, taken just before
its request. Printed: apps RUNNING per second, p50/p99 create→bound,
bound→running and create→running, CPU seconds per component per 1,000
applications and peak RSS per component (both from ``/proc`` of each process).

Then a migration wave: the metric is flipped so that every application
prefers the other cluster of its pair. Timed until the last one RUNS on its
new cluster with the old copy gone. Whenever an application reports its move
done (``running_on`` the new cluster, no pending clean-up), the old cluster's
Deployments are listed *after* that report: finding the old copy there means
two copies ran on different clusters after the removal was confirmed (the sim
deletes a Deployment's ReplicaSet and pods with it, so the Deployment stands
for its pods).

Modes: ``processes`` (``shoal api``, ``scheduler``, ``kube-controller``,
``cluster-observer``, ``garbage-collector`` and ``shoal sim`` as processes of
their own) and ``up`` (``shoal up`` with its own clusters; ``--up-args`` adds
flags, e.g. ``--single-process``).

    .venv/bin/python bench/e2e.py [--apps 2000] [--clusters 20] [--nodes 50]
        [--mode processes,up] [--no-wave] [--py-spy sim,kube-controller] [--batch 1]

``--batch B`` creates the applications B to a request (``POST
/kubernetes/applications``, as ``shoal create -f`` sends a file of them).

``--keep DIR`` keeps each set-up's data directory (logs, store). ``--py-spy`` records the
named components from the burst to the end of the wave
(``/tmp/e2e-<set-up>-<component>.txt``, folded stacks; ``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402
import yaml  # noqa: E402

from bench.schedule import cpu_seconds, start_profiles, stop_profiles  # noqa: E402
from shoal.client.rest import (  # noqa: E402
    ApiError,
    Conflict,
    ShoalClient,
    collection_path,
    error_for,
)
from shoal.model.base import Metadata  # noqa: E402
from shoal.model.core import GlobalMetricsProvider  # noqa: E402
from shoal.model.kubernetes import (  # noqa: E402
    Application,
    ApplicationSpec,
    Cluster,
    ClusterConstraints,
    ClusterState,
    Constraints,
    MetricRef,
)
from shoal.testing.builders import cluster, deployment, metric, provider  # noqa: E402
from shoal.testing.launch import (  # noqa: E402
    ApiProcess,
    controller,
    free_ports,
    spawn_shoal,
    stop,
)
from shoal.testing.wait import wait_for  # noqa: E402

NS = "default"
PROVIDER = "e2e"
# min_migration_interval 0: the migration wave measures how fast moves follow a metric change,
# not the pacing (60 s after an application settled, by default)
SCHEDULER = {"metrics_refresh": 0.5, "min_migration_interval": 0}


# --- /proc of each process -------------------------------------------------------------------


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def component_of(pid: int) -> str | None:
    """The ``shoal`` command a process runs (``api``, ``sim``…), None if it is not one."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    words = [a.decode() for a in argv if a]
    if "-m" not in words[:-1] or not words[words.index("-m") + 1].startswith("shoal."):
        return None
    module, rest = words[words.index("-m") + 1], words[words.index("-m") + 2 :]
    if module != "shoal.cli.main":
        return "agents" if module == "shoal.system.processes" else module
    return rest[0] if rest else "shoal"


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def components(roots: list[int]) -> dict[str, int]:
    """Component name → pid, for the shoal processes at or below ``roots``."""
    out: dict[str, int] = {}
    for root in roots:
        for pid in descendants(root):
            name = component_of(pid)
            if name is not None and name not in out:
                out[name] = pid
    return out


def peak_rss(procs: dict[str, int]) -> dict[str, int]:
    out = {}
    for name, pid in procs.items():
        with contextlib.suppress(OSError):
            out[name] = round(peak_rss_mib(pid))
    return out


def cpu_snapshot(procs: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in procs.items():
        with contextlib.suppress(OSError):
            out[name] = cpu_seconds(pid)
    return out


# --- the workload ------------------------------------------------------------------------------


def application(i: int, groups: int) -> Application:
    name = f"e2e-{i:05d}"
    return Application(
        metadata=Metadata(name=name, namespace=NS),
        spec=ApplicationSpec(
            manifest=[deployment(name, requests={"cpu": "10m", "memory": "16Mi"})],
            constraints=Constraints(cluster=ClusterConstraints(labels=[f"group=g{i % groups}"])),
        ),
    )


def scores(names: list[str], flipped: bool) -> dict[str, float]:
    """The first cluster of each pair preferred (0.9 against 0.1), or the second."""
    return {n: (0.1 if (i % 2 == 0) == flipped else 0.9) for i, n in enumerate(names)}


async def prepare(
    client: ShoalClient, kubeconfigs: dict[str, dict[str, Any]], agents: bool = False
) -> None:
    """The provider and one metric per cluster; each cluster labelled with its pair.

    Clusters that exist (``shoal up``'s) get the labels and metrics; others are created.
    With ``agents`` (``shoal up`` runs one per cluster) it also waits until each cluster's
    agent has registered: agents that still start during the burst put their start (a TLS
    context each, most of it) into the CPU per application.
    """
    names = list(kubeconfigs)
    with contextlib.suppress(Conflict):
        await client.create(provider(PROVIDER, scores(names, flipped=False)))
    for i, name in enumerate(names):
        with contextlib.suppress(Conflict):
            await client.create(metric(f"m-{name}", PROVIDER, key=name))
        labels = {"group": f"g{i // 2}"}
        refs = [MetricRef(name=f"m-{name}", weight=1.0)]
        try:
            stored = await client.get(Cluster, name, NS)
        except ApiError:
            fresh = cluster(name, labels=labels)
            fresh.spec.kubeconfig = kubeconfigs[name]
            fresh.spec.metrics = refs
            await client.create(fresh)
            continue
        stored.metadata.labels.update(labels)
        stored.spec.metrics = refs
        await client.update(stored)

    async def online() -> bool:
        listed = (await client.list(Cluster, NS)).items
        up = {
            c.metadata.name
            for c in listed
            if c.status.state is ClusterState.ONLINE and (c.status.agent or not agents)
        }
        return set(names) <= up

    await wait_for(online, timeout=60, interval=0.2, message="clusters ONLINE, agents in")


async def flip(client: ShoalClient, names: list[str]) -> None:
    stored = await client.get(GlobalMetricsProvider, PROVIDER)
    assert stored.spec.static is not None
    stored.spec.static.metrics = scores(names, flipped=True)
    await client.update(stored)


@dataclass
class Watched:
    """What the informer saw per application: when bound, when running, where."""

    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # running_on, once done
    moved: dict[str, float] = field(default_factory=dict)  # wave: done on the new cluster
    wave_from: dict[str, str] = field(default_factory=dict)  # wave: app → old cluster
    confirmed: asyncio.Queue[tuple[str, str]] = field(default_factory=asyncio.Queue)
    events: int = 0  # application events (each a stored write) the informer delivered

    def seen(self, app: dict[str, Any]) -> None:
        """One application event, as plain JSON (no models: this process shares the CPU)."""
        now = time.monotonic()
        self.events += 1
        name, status = app["metadata"]["name"], app.get("status") or {}
        to = (status.get("scheduled_to") or {}).get("name")
        if to is not None:
            self.bound.setdefault(name, now)
        on = (status.get("running_on") or {}).get("name")
        done = (
            status.get("state") == "RUNNING"
            and on is not None
            and to == on
            and not status.get("pending_cleanups")
        )
        if not done or on is None:
            return
        self.running.setdefault(name, now)
        self.where[name] = on
        old = self.wave_from.get(name)
        if old is not None and on != old and name not in self.moved:
            self.moved[name] = now
            self.confirmed.put_nowait((name, old))

    async def watch(self, client: ShoalClient, revision: int) -> None:
        """Every application's changes after ``revision``, as plain JSON, until cancelled."""
        async for event in client.watch_json(Application, NS, resource_version=revision):
            self.seen(event["object"])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values):.2f} s, p99 {pct(values, 0.99):.2f} s"


def bodies(n: int, groups: int) -> list[tuple[str, bytes]]:
    """Each application's create body, encoded before the clock starts."""
    return [
        (app.metadata.name, orjson.dumps(app.model_dump(mode="json", exclude_defaults=True)))
        for app in (application(i, groups) for i in range(n))
    ]


async def burst(
    client: ShoalClient, todo: list[tuple[str, bytes]], clients: int, batch: int = 1
) -> dict[str, float]:
    """Create every application: one request each from ``clients`` in flight, or ``batch``
    to a request (``POST /kubernetes/applications``) with ``clients / batch`` in flight."""
    created: dict[str, float] = {}
    if batch == 1:
        url = client.url + collection_path(Application, NS)
        requests = [([name], body) for name, body in todo]
    else:
        url = client.url + collection_path(Application)
        requests = [
            ([name for name, _ in chunk], b'{"items":[%s]}' % b",".join(b for _, b in chunk))
            for chunk in (todo[i : i + batch] for i in range(0, len(todo), batch))
        ]
        clients = max(2, clients // batch)
    queue = iter(requests)

    async def creator() -> None:
        for names, body in queue:
            for _ in range(5):
                now = time.monotonic()
                created.update((name, now) for name in names)
                try:
                    async with client.session.post(url, data=body) as response:
                        data = await response.read()
                except (aiohttp.ClientError, TimeoutError):
                    continue
                if response.status >= 400 and response.status != 409:
                    raise error_for(response.status, orjson.loads(data))
                results = orjson.loads(data).get("results", []) if batch > 1 else []
                refused = [r for r in results if r["status"] not in (200, 409)]
                if refused:
                    raise RuntimeError(f"refused: {refused[:3]}")
                break

    await asyncio.gather(*(creator() for _ in range(clients)))
    return created


@dataclass
class Sim:
    """The sim clusters' kube APIs, to list Deployments as any kube client would."""

    kubeconfigs: dict[str, dict[str, Any]]
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=30))

    async def deployments(self, name: str) -> set[str]:
        config = self.kubeconfigs[name]
        server = config["clusters"][0]["cluster"]["server"]
        token = config["users"][0]["user"]["token"]
        resp = await self.http.get(
            f"{server}/apis/apps/v1/namespaces/{NS}/deployments",
            headers={"Authorization": f"Bearer {token}"},
        )
        resp.raise_for_status()
        return {
            item["metadata"]["name"]
            for item in resp.json()["items"]
            if not item["metadata"].get("deletionTimestamp")
        }


async def check_old_copies(sim: Sim, watched: Watched, violations: list[str]) -> None:
    """List the old clusters after moves were reported done: the old copy must be gone."""
    while True:
        batch = [await watched.confirmed.get()]
        await asyncio.sleep(0.1)  # more per list: one list costs the sim what 100 do
        while not watched.confirmed.empty():
            batch.append(watched.confirmed.get_nowait())
        by_cluster: dict[str, list[str]] = {}
        for app, old in batch:
            by_cluster.setdefault(old, []).append(app)
        for old, apps in by_cluster.items():
            present = await sim.deployments(old)
            violations.extend(f"{a} still on {old}" for a in apps if a in present)


async def measure(
    client: ShoalClient,
    sim: Sim,
    roots: list[int],
    args: argparse.Namespace,
    label: str,
    agents: bool = False,
) -> dict[str, Any]:
    """One burst on a running set-up; ``agents``: one registers per cluster (``shoal up``)."""
    names = list(sim.kubeconfigs)
    groups = len(names) // 2
    await prepare(client, sim.kubeconfigs, agents=agents)
    procs = components(roots)
    profilers = start_profiles(procs, args.py_spy, f"e2e-{label.split()[0]}")
    watched = Watched()
    revision = (await client.list(Application, NS)).revision
    watch = asyncio.create_task(watched.watch(client, revision))
    n = args.apps
    todo = bodies(n, groups)
    cpu0 = cpu_snapshot(procs)
    own0 = time.process_time()
    t0 = time.monotonic()
    created = await burst(client, todo, args.clients, args.batch)
    t_created = time.monotonic() - t0
    await wait_for(
        lambda: len(watched.running) >= n, timeout=args.timeout, interval=0.05,
        message=f"{n} applications RUNNING (have {len(watched.running)})",
    )  # fmt: skip
    t_all = max(watched.running.values()) - t0
    cpu1 = cpu_snapshot(procs)
    own = time.process_time() - own0
    writes = watched.events
    result: dict[str, Any] = {
        "label": label,
        "apps": n,
        "created_s": round(t_created, 2),
        "all_running_s": round(t_all, 2),
        "running_per_s": round(n / t_all, 1),
        "create_bound": [watched.bound[a] - created[a] for a in created],
        "bound_running": [watched.running[a] - watched.bound[a] for a in created],
        "create_running": [watched.running[a] - created[a] for a in created],
        "cpu_per_1000": {k: round((cpu1[k] - cpu0[k]) * 1000 / n, 2) for k in cpu1 if k in cpu0},
        "writes_per_app": round(writes / n, 2),
        "bench_cpu_per_1000": round(own * 1000 / n, 2),
    }
    if args.wave:
        result["wave"] = await wave(client, sim, watched, names, args.timeout)
        cpu2 = cpu_snapshot(procs)
        result["wave_cpu_per_1000"] = {
            k: round((cpu2[k] - cpu1[k]) * 1000 / n, 2) for k in cpu2 if k in cpu1
        }
    result["peak_rss_mib"] = peak_rss(procs)
    stop_profiles(profilers)
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    return result


async def wave(
    client: ShoalClient, sim: Sim, watched: Watched, names: list[str], timeout: float
) -> dict[str, Any]:
    """Flip the metric; until every application runs on the other cluster of its pair."""
    partner = {n: names[i ^ 1] for i, n in enumerate(names)}
    start_rev = dict(watched.where)
    for app, on in start_rev.items():
        watched.wave_from[app] = on
    violations: list[str] = []
    checker = asyncio.create_task(check_old_copies(sim, watched, violations))
    t0 = time.monotonic()
    await flip(client, names)
    n = len(start_rev)
    await wait_for(
        lambda: len(watched.moved) >= n, timeout=timeout, interval=0.05,
        message=f"{n} applications moved (have {len(watched.moved)})",
    )  # fmt: skip
    t_moved = max(watched.moved.values()) - t0
    await wait_for(lambda: watched.confirmed.empty(), timeout=30, interval=0.05)
    await asyncio.sleep(0.2)  # the last batch's lists
    checker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await checker
    wrong = [a for a, on in watched.where.items() if on != partner[start_rev[a]]]
    left = 0
    for old in set(start_rev.values()):
        left += len(await sim.deployments(old) & set(start_rev))
    first = min(watched.moved.values()) - t0
    return {
        "apps": n,
        "first_moved_s": round(first, 2),
        "all_moved_s": round(t_moved, 2),
        "moved_per_s": round(n / t_moved, 1),
        "wrong_cluster": len(wrong),
        "old_copies_after_confirmed": len(violations),
        "old_copies_left": left,
        "examples": violations[:3],
    }


# --- the set-ups -------------------------------------------------------------------------------


async def run_processes(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        kube_dir = tmp / "kubeconfigs"
        sim = spawn_shoal(
            "sim", "--clusters", str(args.clusters), "--nodes", str(args.nodes),
            "--port", str(free_ports(1)), "--out", str(kube_dir), log=tmp / "sim.log",
        )  # fmt: skip
        procs.append(sim)
        # as shoal up runs it: Shoal's kube controller deploys, so applications are created
        # with its finalizer (shoal api --kube-finalizer)
        # figures on the open API, as before (bench/api.py --rbac: the secured door)
        api = ApiProcess(
            f"sqlite://{tmp / 'shoal.db'}", log=tmp / "api.log", kube_finalizer=True, secured=False
        )
        procs.append(api.proc)
        await api.wait_ready()
        paths = [kube_dir / f"sim-{i}.yaml" for i in range(args.clusters)]
        await wait_for(lambda: all(p.exists() for p in paths), timeout=60, message="sim")
        kubeconfigs = {p.stem: yaml.safe_load(p.read_text()) for p in paths}
        config = tmp / "scheduler.json"
        config.write_text(json.dumps(SCHEDULER))
        procs.append(controller("scheduler", api.url, "--config", str(config)))
        for name in ("kube-controller", "cluster-observer", "garbage-collector"):
            procs.append(controller(name, api.url, log=tmp / f"{name}.log"))
        async with ShoalClient(api.url, max_connections=args.clients + 8) as client:
            return await measure(
                client, Sim(kubeconfigs), [p.pid for p in procs], args, "separate processes"
            )
    finally:
        for proc in reversed(procs):
            stop(proc)


async def run_up(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    port = free_ports(1)  # shoal up binds it later
    config = tmp / "scheduler.json"
    config.write_text(json.dumps(SCHEDULER))
    extra = shlex.split(args.up_args)
    proc = spawn_shoal(
        "up", "--port", str(port), "--data-dir", str(tmp), "--clusters", str(args.clusters),
        "--nodes", str(args.nodes), "--no-demo", "--scheduler-config", str(config), *extra,
        log=tmp / "up.log",
    )  # fmt: skip
    try:
        security = tmp / "security" / "config.yaml"

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError((tmp / "up.log").read_text()[-3000:])
            return security.exists()

        await wait_for(ready, timeout=120, interval=0.2, message="shoal up's banner")
        token = yaml.safe_load(security.read_text())["token"]
        paths = [tmp / "kubeconfigs" / f"sim-{i + 1}.yaml" for i in range(args.clusters)]
        kubeconfigs = {p.stem: yaml.safe_load(p.read_text()) for p in paths}
        url = f"http://127.0.0.1:{port}"
        async with ShoalClient(url, token=token, max_connections=args.clients + 8) as client:
            label = "shoal up " + " ".join(extra) if extra else "shoal up"
            return await measure(client, Sim(kubeconfigs), [proc.pid], args, label, agents=True)
    finally:
        stop(proc)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load average {load}; "
        f"{args.clusters} sim clusters x {args.nodes} nodes, {args.clients} clients, "
        + ("single creates" if args.batch == 1 else f"creates in batches of {args.batch}")
    )
    print(
        "| set-up | apps | all running | apps/s | create→bound p50/p99 | bound→running p50/p99 "
        "| create→running p50/p99 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        cells = [
            f"{pct(r[k], 0.5):.2f} / {pct(r[k], 0.99):.2f} s"
            for k in ("create_bound", "bound_running", "create_running")
        ]
        print(
            f"| {r['label']} | {r['apps']} | {r['all_running_s']} s | {r['running_per_s']} | "
            + " | ".join(cells)
            + " |"
        )
    for r in results:
        print(f"\n{r['label']}: created in {r['created_s']} s")
        print(f"  CPU s per 1,000 apps (burst): {r['cpu_per_1000']}")
        print(f"  application writes per application until all RUNNING: {r['writes_per_app']}")
        print(f"  the bench's own CPU s per 1,000 apps (clients, informer): "
              f"{r['bench_cpu_per_1000']}")
        if "wave_cpu_per_1000" in r:
            print(f"  CPU s per 1,000 apps (wave):  {r['wave_cpu_per_1000']}")
        print(f"  peak RSS MiB: {r['peak_rss_mib']}")
        if "wave" in r:
            print(f"  migration wave: {json.dumps(r['wave'])}")


@contextlib.contextmanager
def workdir(keep: str | None) -> Iterator[Path]:
    """A temporary folder, or one kept under ``keep`` (logs, store) to look at afterwards."""
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(dir=keep))
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


async def main(args: argparse.Namespace) -> None:
    results = []
    for mode in args.mode.split(","):
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{mode}: starting, load average {load}", flush=True)
        with workdir(args.keep) as tmp:
            run = run_processes if mode == "processes" else run_up
            if args.keep:
                print(f"{mode}: data, logs and stores kept in {tmp}", flush=True)
            result = await run(args, tmp)
            results.append(result)
            print(
                f"{result['label']}: {result['running_per_s']} apps/s, "
                f"create→running {spread(result['create_running'])}",
                flush=True,
            )
    report(results, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=2000)
    parser.add_argument("--clusters", type=int, default=20, help="even: clusters go in pairs")
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--clients", type=int, default=16, help="creates in flight")
    parser.add_argument(
        "--batch", type=int, default=1,
        help="applications per create request (POST /kubernetes/applications); 1: single "
        "creates. Requests in flight: clients / batch, at least 2",
    )
    parser.add_argument("--mode", default="processes", help="processes, up, or both: processes,up")
    parser.add_argument("--up-args", default="", help="more flags for shoal up")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-wave", dest="wave", action="store_false")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep each set-up's data (logs, store) in a folder under DIR"
    )
    parser.add_argument(
        "--py-spy", default="", help="components to profile, e.g. sim,kube-controller (py-spy)"
    )
    asyncio.run(main(parser.parse_args()))
