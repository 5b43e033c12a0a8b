"""Whole-system chaos soak: random churn and kills under ``shoal up``, then an audit of the
member clusters themselves.

    .venv/bin/python bench/soak.py [--minutes 5] [--seed N] [--clusters 3] [--settle 180]

Every component runs as its own process, as ``shoal up`` starts them (API on SQLite,
scheduler, kube controller, observer, garbage collector, reschedule controller, agents,
``shoal sim``). For ``--minutes``, from ``--seed``, it creates, updates and deletes
applications (some that fit nowhere), creates and deletes fleet pods, relabels clusters
(their applications move), makes clusters unreachable and reachable again, deletes
clusters and registers them again under the same name, requests reschedules, and
SIGKILLs components (``shoal up`` starts them again). Then it heals the world and lets
the system settle, auditing until every invariant holds or ``--settle`` seconds pass:

- every application that fits somewhere is RUNNING on the cluster its status names, with
  each of its objects there once; one that fits nowhere is PENDING (its copy may still run
  where it ran, as in Krake, until a cluster fits);
- no member cluster holds an object labelled as Shoal's whose application is gone, or
  that sits on a cluster the application does not run on (no orphans);
- no fleet pod is Scheduled without its member pod, and no member pod is made twice or
  for a fleet pod that is gone;
- no application names a cluster that does not exist.

It prints the counts of actions and kills, the time the system took to settle, and each
violated invariant with the history of the objects involved; the exit status is 1 when
one still held at the end. The seed reproduces the run's choices (not the timing of the
processes). Left out for now: etcd with two API servers, cordon and drain, metric
providers that fail.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shoal.kube.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID  # noqa: E402
from tests.util import free_port  # noqa: E402

NS = "default"
APPS = f"/kubernetes/namespaces/{NS}/applications"
CLUSTERS = f"/kubernetes/namespaces/{NS}/clusters"
PODS = f"/scheduling/namespaces/{NS}/pods"
POD_UID = "shoal.dev/pod-uid"
KILLABLE = ("api", "scheduler", "kube-controller", "cluster-observer", "garbage-collector",
            "reschedule-controller", "agents")  # fmt: skip
LOCATIONS = ["DE", "FR", "FI", "NL", "IT"]
Obj = dict[str, Any]


class Soak:
    def __init__(self, args: argparse.Namespace, data: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.data = data
        self.port = free_port()
        self.actions: Counter[str] = Counter()
        self.kills: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.history: dict[str, list[str]] = defaultdict(list)
        self.start = time.monotonic()
        self.serial = 0
        self.unreachable: set[str] = set()
        self.deleted: dict[str, Obj] = {}  # cluster name → its body, to register again
        self.up: asyncio.subprocess.Process | None = None

    def note(self, what: str, line: str) -> None:
        self.history[what].append(f"{time.monotonic() - self.start:7.2f}s {line}")

    # the system ------------------------------------------------------------------------

    async def start_up(self) -> None:
        env = {**os.environ, "COLUMNS": "200"}
        env.pop("SHOAL_CONFIG", None)
        log = _log_file(self.data / "up.log")
        self.up = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "shoal.cli.main", "up", "--port", str(self.port),
            "--data-dir", str(self.data), "--clusters", str(self.args.clusters), "--no-demo",
            stdout=log, stderr=asyncio.subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        config = self.data / "security" / "config.yaml"
        deadline = time.monotonic() + 120
        while not config.exists():
            if time.monotonic() > deadline or self.up.returncode is not None:
                raise RuntimeError(f"shoal up did not start; see {self.data / 'up.log'}")
            await asyncio.sleep(0.2)
        settings = yaml.safe_load(config.read_text())
        self.api = httpx.AsyncClient(
            base_url=settings["api"], timeout=10,
            headers={"authorization": f"Bearer {settings['token']}"},
        )  # fmt: skip
        self.sim = httpx.AsyncClient(base_url=(self.data / "sim.url").read_text().strip(),
                                     timeout=10)  # fmt: skip
        self.names = [f"sim-{i + 1}" for i in range(self.args.clusters)]

    async def stop_up(self) -> None:
        if self.up is not None and self.up.returncode is None:
            self.up.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.up.wait(), 30)
            except TimeoutError:
                self.up.kill()
        for client in (getattr(self, "api", None), getattr(self, "sim", None)):
            if client is not None:
                await client.aclose()

    def components(self) -> dict[str, int]:
        """The component processes of ``shoal up`` (its children), by name."""
        assert self.up is not None
        found: dict[str, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                words = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if parent != self.up.pid:
                continue
            text = [w.decode() for w in words]
            name = "agents" if "shoal.cli.up_processes" in text else next(
                (w for w in text if w in KILLABLE or w == "sim"), "?")
            found[name] = int(entry.name)
        return found

    # actions ---------------------------------------------------------------------------

    def _app(self, name: str) -> Obj:
        fits = self.rng.random() > 0.15
        labels = [f"location in ({', '.join(self.rng.sample(LOCATIONS[:3], 2))})"] if fits \
            else ["location is US"]
        manifest: list[Obj] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name}, "data": {"v": "0"}}]
        if self.rng.random() < 0.3:
            manifest.append({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
        return {"api": "kubernetes", "kind": "Application", "metadata": {"name": name},
                "spec": {"manifest": manifest, "constraints": {"cluster": {"labels": labels}}}}

    async def _apps(self) -> list[Obj]:
        return list((await self.api.get(APPS)).json()["items"])

    async def create_app(self) -> None:
        self.serial += 1
        name = f"app-{self.serial}"
        body = self._app(name)
        answer = await self.api.post(APPS, json=body)
        self.note(name, f"create {body['spec']['constraints']['cluster']['labels']}: "
                        f"{answer.status_code}")  # fmt: skip

    async def update_app(self) -> None:
        apps = [a for a in await self._apps() if not a["metadata"].get("deleted")]
        if not apps:
            return
        app = self.rng.choice(apps)
        app["spec"]["manifest"][0]["data"] = {"v": str(self.rng.randrange(1000))}
        answer = await self.api.put(f"{APPS}/{app['metadata']['name']}", json=app)
        self.note(app["metadata"]["name"], f"update: {answer.status_code}")

    async def delete_app(self) -> None:
        apps = await self._apps()
        if apps:
            name = self.rng.choice(apps)["metadata"]["name"]
            answer = await self.api.delete(f"{APPS}/{name}")
            self.note(name, f"delete: {answer.status_code}")

    async def reschedule_app(self) -> None:
        apps = await self._apps()
        if apps:
            name = self.rng.choice(apps)["metadata"]["name"]
            stamp = {"requested": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            answer = await self.api.put(f"{APPS}/{name}/reschedule", json=stamp)
            self.note(name, f"reschedule: {answer.status_code}")

    async def relabel_cluster(self) -> None:
        name = self.rng.choice([n for n in self.names if n not in self.deleted])
        cluster = (await self.api.get(f"{CLUSTERS}/{name}")).json()
        location = self.rng.choice(LOCATIONS)
        cluster["metadata"]["labels"]["location"] = location
        answer = await self.api.put(f"{CLUSTERS}/{name}", json=cluster)
        self.note(name, f"relabel location={location}: {answer.status_code}")

    async def toggle_unreachable(self) -> None:
        name = self.rng.choice(self.names)
        if name in self.unreachable:
            await self.sim.delete(f"/admin/clusters/{name}/faults")
            self.unreachable.discard(name)
            self.note(name, "reachable again")
        else:
            await self.sim.post(f"/admin/clusters/{name}/faults", json={"unreachable": True})
            self.unreachable.add(name)
            self.note(name, "unreachable")

    async def delete_cluster(self) -> None:
        if self.deleted:
            name = self.rng.choice(sorted(self.deleted))
            await self._register_again(name)
            return
        name = self.rng.choice(self.names)
        answer = await self.api.get(f"{CLUSTERS}/{name}")
        if answer.status_code != 200:
            return
        body = answer.json()
        self.deleted[name] = {"api": "kubernetes", "kind": "Cluster",
                              "metadata": {"name": name, "labels": body["metadata"]["labels"]},
                              "spec": body["spec"]}  # fmt: skip
        answer = await self.api.delete(f"{CLUSTERS}/{name}")
        self.note(name, f"delete: {answer.status_code}")

    async def _register_again(self, name: str) -> None:
        answer = await self.api.post(CLUSTERS, json=self.deleted[name])
        if answer.status_code == 200:
            del self.deleted[name]
        self.note(name, f"register again: {answer.status_code} {answer.text[:120]}")

    async def create_pod(self) -> None:
        self.serial += 1
        name = f"pod-{self.serial}"
        body = {"api": "scheduling", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}  # fmt: skip
        answer = await self.api.post(PODS, json=body)
        self.note(name, f"create: {answer.status_code}")

    async def delete_pod(self) -> None:
        pods = (await self.api.get(PODS)).json()["items"]
        if pods:
            name = self.rng.choice(pods)["metadata"]["name"]
            answer = await self.api.delete(f"{PODS}/{name}")
            self.note(name, f"delete: {answer.status_code}")

    async def kill(self) -> None:
        name = self.rng.choice(KILLABLE)
        pid = self.components().get(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                self.kills[name] += 1
                self.note("processes", f"SIGKILL {name} ({pid})")

    ACTIONS = {
        "create_app": 30, "update_app": 10, "delete_app": 10, "reschedule_app": 4,
        "create_pod": 12, "delete_pod": 5, "relabel_cluster": 4, "toggle_unreachable": 3,
        "delete_cluster": 3, "kill": 3,
    }  # fmt: skip

    async def chaos(self) -> None:
        deadline = time.monotonic() + self.args.minutes * 60
        names, weights = zip(*self.ACTIONS.items(), strict=True)
        while time.monotonic() < deadline:
            action = self.rng.choices(names, weights)[0]
            try:
                await getattr(self, action)()
                self.actions[action] += 1
            except (httpx.HTTPError, KeyError, ValueError) as error:  # the API was killed
                self.errors[f"{action}: {type(error).__name__}"] += 1
            await asyncio.sleep(self.rng.uniform(0.02, 0.3))

    async def heal(self) -> None:
        """The world back to whole: every cluster reachable and registered."""
        for name in self.names:
            await self.sim.delete(f"/admin/clusters/{name}/faults")
        self.unreachable.clear()
        deadline = time.monotonic() + 60
        while self.deleted and time.monotonic() < deadline:
            for name in sorted(self.deleted):
                with contextlib.suppress(httpx.HTTPError):
                    await self._register_again(name)
            await asyncio.sleep(1)

    # audit -----------------------------------------------------------------------------

    async def _member(self, cluster: str, path: str) -> list[Obj]:
        answer = await self.sim.get(f"/clusters/{cluster}{path}")
        return list(answer.json().get("items") or []) if answer.status_code == 200 else []

    async def audit(self) -> list[tuple[str, str]]:
        """Every violated invariant: (object, what is wrong)."""
        wrong: list[tuple[str, str]] = []
        listed = (await self.api.get(CLUSTERS)).json()["items"]
        clusters = {c["metadata"]["name"]: c for c in listed}
        apps = {a["metadata"]["name"]: a for a in await self._apps()}
        online = [c for c in clusters.values() if c["status"]["state"] == "ONLINE"]
        held: dict[tuple[str, str, str], list[str]] = defaultdict(list)  # (kind, name, uid)
        for cluster in self.names:
            for path, kind in ((f"/api/v1/namespaces/{NS}/configmaps", "ConfigMap"),
                               (f"/apis/apps/v1/namespaces/{NS}/deployments", "Deployment")):
                for obj in await self._member(cluster, path):
                    labels = obj["metadata"].get("labels") or {}
                    if LABEL_UID not in labels:
                        continue
                    owner = labels.get(LABEL_NAME, "")
                    held[(kind, owner, labels[LABEL_UID])].append(cluster)
                    app = apps.get(owner)
                    if app is None or app["metadata"]["uid"] != labels[LABEL_UID]:
                        wrong.append((owner, f"orphan {kind} on {cluster}: application gone"))
                    elif (app["status"].get("running_on") or {}).get("name") != cluster:
                        wrong.append((owner, f"orphan {kind} on {cluster}: it runs elsewhere"))
                    elif labels.get(LABEL_NAMESPACE) != NS:
                        wrong.append((owner, f"{kind} on {cluster} labelled for another namespace"))
        for name, app in apps.items():
            status = app["status"]
            for field in ("scheduled_to", "running_on"):
                ref = status.get(field)
                if ref and ref["name"] not in clusters:
                    wrong.append((name, f"{field} names {ref['name']}, which does not exist"))
            if app["metadata"].get("deleted"):
                wrong.append((name, "still being deleted"))
                continue
            labels = app["spec"]["constraints"]["cluster"]["labels"]
            fits = any(_matches(labels, c["metadata"]["labels"]) for c in online)
            if not fits:  # waiting; a copy may run on where it ran (the orphan check above)
                if status["state"] != "PENDING" or status.get("scheduled_to"):
                    wrong.append((name, f"fits nowhere but is {status['state']}"))
                continue
            running = (status.get("running_on") or {}).get("name")
            if status["state"] != "RUNNING" or running != (status.get("scheduled_to") or {}).get(
                "name"
            ):
                wrong.append((name, f"fits but is {status['state']} (running on {running})"))
                continue
            for obj in app["spec"]["manifest"]:
                where = held.get((obj["kind"], name, app["metadata"]["uid"]), [])
                if where != [running]:
                    wrong.append((name, f"{obj['kind']} on {where}, expected once on {running}"))
        pods = {p["metadata"]["uid"]: p for p in (await self.api.get(PODS)).json()["items"]}
        members: dict[str, list[str]] = defaultdict(list)
        for cluster in self.names:
            for member in await self._member(cluster, f"/api/v1/namespaces/{NS}/pods"):
                uid = (member["metadata"].get("annotations") or {}).get(POD_UID)
                if uid is not None:
                    members[uid].append(cluster)
        for uid, where in members.items():
            if len(where) > 1:
                wrong.append((uid, f"fleet pod bound twice: {where}"))
            if uid not in pods:
                wrong.append((uid, f"member pod on {where} for a fleet pod that is gone"))
        for uid, pod in pods.items():
            name = pod["metadata"]["name"]
            phase, cluster = pod["status"]["phase"], pod["status"].get("cluster")
            if phase == "Scheduled" and members.get(uid) != [cluster]:
                wrong.append((name, f"Scheduled on {cluster}, member pods on {members.get(uid)}"))
            elif phase == "Pending":
                wrong.append((name, "still Pending"))
        return wrong

    async def settle(self) -> tuple[float, list[tuple[str, str]]]:
        start = time.monotonic()
        wrong: list[tuple[str, str]] = []
        while time.monotonic() - start < self.args.settle:
            try:
                wrong = await self.audit()
            except httpx.HTTPError as error:
                wrong = [("audit", f"{type(error).__name__}: {error}")]
            if not wrong:
                break
            await asyncio.sleep(1)
        return time.monotonic() - start, wrong


def _log_file(path: Path) -> Any:
    return path.open("wb")  # kept open for the process's life


def _matches(constraints: list[str], labels: dict[str, str]) -> bool:
    """The two spellings the soak writes: ``location in (A, B)`` and ``location is X``."""
    for text in constraints:
        key, _, rest = text.partition(" ")
        _op, _, values = rest.partition(" ")
        allowed = [v.strip() for v in values.strip("()").split(",")]
        if labels.get(key) not in allowed:
            return False
    return True


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="shoal-soak-") as tmp:
        soak = Soak(args, Path(tmp))
        try:
            await soak.start_up()
            await soak.chaos()
            await soak.heal()
            took, wrong = await soak.settle()
            left = soak.components()
        finally:
            await soak.stop_up()
        print(f"\nShoal soak — seed {args.seed}, {args.minutes:g} min, {args.clusters} clusters")
        print("actions: " + ", ".join(f"{k} {v}" for k, v in sorted(soak.actions.items())))
        print("kills:   " + (", ".join(f"{k} {v}" for k, v in sorted(soak.kills.items()))
                             or "none"))  # fmt: skip
        if soak.errors:
            print("refused while a component was down: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(soak.errors.items())))
        print(f"components running at the end: {', '.join(sorted(left))}")
        if not wrong:
            print(f"settled in {took:.1f} s (bound {args.settle:g} s): every invariant holds")
            return 0
        print(f"NOT settled after {took:.1f} s: {len(wrong)} violation(s)")
        for what, why in wrong[:30]:
            print(f"  {what}: {why}")
            for line in soak.history.get(what, [])[-8:]:
                print(f"      {line}")
            for cluster in [n for n in soak.names if n in why]:
                for line in soak.history.get(cluster, [])[-6:]:
                    print(f"      {cluster}: {line}")
        return 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--settle", type=float, default=180.0)
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
