"""Whole-system chaos soak: random churn and kills under ``shoal up``, then an audit of the
member clusters themselves.

    .venv/bin/python bench/soak.py [--minutes 5] [--seed N] [--clusters 3] [--settle 180]
                                   [--store sqlite|etcd]

Every component runs as its own process, as ``shoal up --tls`` starts them (API, scheduler,
kube controller, observer, garbage collector, reschedule controller, agents, ``shoal
sim``). A third of ``--clusters`` join in pull mode (``pull-1``…, ``shoal up
--pull-clusters``), each with its agent (``shoal join``) as a process; the rest are push
clusters (``sim-1``…). The store is SQLite, or with ``--store etcd`` a three-member etcd with a
second API server on it: the soak's own requests go to either API server. For
``--minutes``, from ``--seed``, it creates, updates and deletes applications (some that fit
nowhere), creates and deletes fleet pods, relabels clusters (their applications move),
cordons, uncordons and drains them, makes them unreachable and reachable again, deletes
them and registers them again under the same name, changes metric values and makes the
metrics provider fail, requests reschedules and runs RescheduleTasks, SIGKILLs components,
pull clusters' agents among them (``shoal up`` starts its own again; the soak restarts the
second API server and etcd members after a random delay, keeping etcd's quorum), and stops
a pull cluster's agent (SIGSTOP, its network as good as cut) for longer than the lease, so
that its cluster goes OFFLINE and its shares move, then lets it go on. Pull clusters are
never deleted: that revokes the agent's credential, and only a new join token brings the
cluster back. Then it heals the world and lets the system settle, auditing until every
invariant holds or ``--settle`` seconds pass:

- every application that fits somewhere is RUNNING on the cluster its status names, with
  each of its objects there once; one that fits nowhere is PENDING (its copy may still run
  where it ran, as in Krake, until a cluster fits); a quarter of them run on two clusters
  (``spec.placement``): each of its objects is on each of its placements' clusters and no
  other, every one of them ONLINE and fitting, and the Deployments' replicas read on the
  member clusters add up to the desired count (divided) or are all there on each
  (duplicated);
- no member cluster holds an object labelled as Shoal's whose application is gone, or
  that sits on a cluster the application does not run on (no orphans);
- no fleet pod is Scheduled without its member pod, and no member pod is made twice or
  for a fleet pod that is gone; no node holds more than its allocatable CPU and memory;
- no application names a cluster that does not exist;
- every acknowledged create is in the store (unless an acknowledged delete followed);
- every RescheduleTask finished;
- every informer of every component caught up: it saw the newest revision of its kind and
  holds as many objects as the store;
- no request was answered 500: none of the soak's own, and no unhandled error in the API
  servers' logs (503 "store unavailable" is counted: etcd answers so while it elects a
  leader, and nothing was acknowledged).

It prints the counts of actions and kills, the time the system took to settle, and each
violated invariant with the history of the objects involved; the exit status is 1 when
one still held at the end. The seed reproduces the run's choices (not the timing of the
processes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shoal.copies.owners import LABEL_NAME, LABEL_NAMESPACE, LABEL_UID  # noqa: E402
from shoal.machinery.resources import amount, pod_requests  # noqa: E402
from shoal.system.components import NAMES  # noqa: E402
from tests.fixtures.etcd import EtcdCluster, running_etcd_cluster  # noqa: E402
from tests.util import free_port, free_ports  # noqa: E402

NS = "default"
APPS = f"/kubernetes/namespaces/{NS}/applications"
CLUSTERS = f"/kubernetes/namespaces/{NS}/clusters"
PODS = f"/scheduling/namespaces/{NS}/pods"
TASKS = "/scheduling/rescheduletasks"
PROVIDER = "/core/globalmetricsproviders/sample"
POD_UID = "shoal.dev/pod-uid"
KILLABLE = ("api", "scheduler", "kube-controller", "cluster-observer", "garbage-collector",
            "reschedule-controller", "agents")  # fmt: skip
LOCATIONS = ["DE", "FR", "FI", "NL", "IT"]
Obj = dict[str, Any]


class Soak:
    def __init__(
        self, args: argparse.Namespace, data: Path, etcd: EtcdCluster | None = None
    ) -> None:
        self.args = args
        self.etcd = etcd
        self.killable = KILLABLE + (("api-2", "etcd") if etcd else ())
        self.pulled: list[str] = []  # the pull clusters, a third of --clusters
        self.paused: dict[str, int] = {}  # pull cluster → its agent's pid, stopped
        self.resumes: list[asyncio.Task[None]] = []
        self.apis: list[httpx.AsyncClient] = []
        self.api_2: asyncio.subprocess.Process | None = None
        self.api_2_command: list[str] = []
        self.restarts: list[asyncio.Task[None]] = []
        self.answers: Counter[str] = Counter()  # 5xx answers, by status and route
        self.created: dict[str, str] = {}  # acknowledged creates: name → uid
        self.removed: set[str] = set()  # acknowledged deletes
        self.cordoned: set[str] = set()
        self.informers: dict[str, int] = {}  # component → informers the audit compared
        self.several = (0, 0)  # applications with spec.placement, and on two clusters
        self.on_pull = 0  # applications running on a pull cluster (at the last audit)
        self.rng = random.Random(args.seed)
        self.data = data
        self.port = free_ports(1)  # shoal up binds it later
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
        store = ["--store", self.etcd.url] if self.etcd else []
        log = _log_file(self.data / "up.log")
        pull = _pull_count(self.args.clusters)
        self.up = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "shoal.cli.main", "up", "--port", str(self.port),
            "--data-dir", str(self.data), "--clusters", str(self.args.clusters - pull),
            "--tls", "--pull-clusters", str(pull), "--no-demo",
            "--metrics-port", str(free_ports(len(NAMES))),
            "--log-level", self.args.log_level, *store,
            stdout=log, stderr=asyncio.subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        config = self.data / "security" / "config.yaml"
        deadline = time.monotonic() + 120
        while not config.exists():
            if time.monotonic() > deadline or self.up.returncode is not None:
                raise RuntimeError(f"shoal up did not start; see {self.data / 'up.log'}")
            await asyncio.sleep(0.2)
        settings = yaml.safe_load(config.read_text())
        self.token = settings["token"]
        self.ca = settings["ca"]  # the API serves HTTPS, as pull clusters need
        self.api = self._client(settings["api"])
        self.apis = [self.api]
        sim_token = (self.data / "sim.token").read_text().strip()  # shoal up's, beside sim.url
        sim_url = (self.data / "sim.url").read_text().strip()
        self.sim = httpx.AsyncClient(base_url=sim_url, timeout=10,
                                     headers={"Authorization": f"Bearer {sim_token}"})  # fmt: skip
        # the member clusters' own APIs, read as kubectl would: the admin API's token is not
        # theirs, and a cluster refuses a token not its own (401)
        self.members = httpx.AsyncClient(base_url=sim_url, timeout=10)
        push = [f"sim-{i + 1}" for i in range(self.args.clusters - pull)]
        self.pulled = [f"pull-{i + 1}" for i in range(pull)]
        self.names = push + self.pulled
        await self._place_pull_clusters()
        if self.etcd:
            await self._start_api_2()

    async def _place_pull_clusters(self) -> None:
        """Each pull cluster, once its agent joined, gets a location the applications ask
        for (``shoal up`` labels them ``location=EDGE``), so that copies run on them."""
        deadline = time.monotonic() + 120
        for name in self.pulled:
            while True:
                answer = await self.api.get(f"{CLUSTERS}/{name}")
                if answer.status_code == 200:
                    cluster = answer.json()
                    cluster["metadata"]["labels"]["location"] = self.rng.choice(LOCATIONS[:3])
                    if (await self.api.put(f"{CLUSTERS}/{name}", json=cluster)).is_success:
                        self.note(name, f"pull cluster at {cluster['metadata']['labels']}")
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pull cluster {name} did not join; see {self.data}/logs")
                await asyncio.sleep(0.5)

    def _client(self, url: str) -> httpx.AsyncClient:
        async def seen(response: httpx.Response) -> None:
            if response.status_code >= 500:
                request = response.request
                self.answers[f"{response.status_code} {request.method} {request.url.path}"] += 1

        return httpx.AsyncClient(
            base_url=url, timeout=10, headers={"authorization": f"Bearer {self.token}"},
            event_hooks={"response": [seen]}, verify=self.ca,
        )  # fmt: skip

    async def _start_api_2(self) -> None:
        """A second API server on the same etcd: ``shoal up``'s own command, another port."""
        if not self.api_2_command:
            deadline = time.monotonic() + 60
            while "api" not in self.components():
                if time.monotonic() > deadline:
                    raise RuntimeError("shoal up started no API server")
                await asyncio.sleep(0.2)
            command = self.components()["api"][1]
            port = free_ports(1)  # the API process binds it later
            command[command.index("--port") + 1] = str(port)
            self.api_2_command = command
            self.apis.append(self._client(f"https://127.0.0.1:{port}"))
        env = {**os.environ, "SHOAL_CONFIG": os.devnull}
        self.api_2 = await asyncio.create_subprocess_exec(
            *self.api_2_command, stdout=_log_file(self.data / "logs" / "api-2.log", "ab"),
            stderr=asyncio.subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip

    async def stop_up(self) -> None:
        for task in (*self.restarts, *self.resumes):
            task.cancel()
        for name in list(self.paused):
            self._resume(name)  # a stopped process ignores shoal up's SIGTERM
        if self.api_2 is not None and self.api_2.returncode is None:
            self.api_2.kill()
            await self.api_2.wait()
        if self.up is not None and self.up.returncode is None:
            self.up.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.up.wait(), 30)
            except TimeoutError:
                self.up.kill()
        for client in (*self.apis, getattr(self, "sim", None), getattr(self, "members", None)):
            if client is not None:
                await client.aclose()

    def components(self) -> dict[str, tuple[int, list[str]]]:
        """The component processes of ``shoal up`` (its children), by name: pid, command."""
        assert self.up is not None
        found: dict[str, tuple[int, list[str]]] = {}
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
            text = [w.decode() for w in words if w]
            if "join" in text:  # a pull cluster's agent, ``shoal join --name pull-1``
                found[f"join-{text[text.index('--name') + 1]}"] = (int(entry.name), text)
                continue
            name = "agents" if "shoal.system.processes" in text else next(
                (w for w in text if w in KILLABLE or w in NAMES or w == "sim"), "?")
            found[name] = (int(entry.name), text)
        return found

    # actions ---------------------------------------------------------------------------

    def _app(self, name: str) -> Obj:
        fits = self.rng.random() > 0.15
        labels = [f"location in ({', '.join(self.rng.sample(LOCATIONS[:3], 2))})"] if fits \
            else ["location is US"]
        manifest: list[Obj] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name}, "data": {"v": "0"}}]
        spec: Obj = {"manifest": manifest, "constraints": {"cluster": {"labels": labels}}}
        several = self.rng.random() < 0.25  # on two clusters, replicas divided or duplicated
        if several:
            spec["placement"] = {"clusters": 2,
                                 "replicas": self.rng.choice(["divided", "duplicated"])}
        if several or self.rng.random() < 0.3:
            manifest.append({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"replicas": 4 if several else 1,
                         "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
        return {"api": "kubernetes", "kind": "Application", "metadata": {"name": name},
                "spec": spec}

    async def _apps(self) -> list[Obj]:
        return list((await self.api.get(APPS)).json()["items"])

    async def create_app(self) -> None:
        self.serial += 1
        name = f"app-{self.serial}"
        body = self._app(name)
        answer = await self.api.post(APPS, json=body)
        self._acknowledged(name, answer)
        self.note(name, f"create {body['spec']['constraints']['cluster']['labels']}: "
                        f"{answer.status_code}")  # fmt: skip

    def _acknowledged(self, name: str, answer: httpx.Response) -> None:
        if answer.status_code in (200, 201):
            self.created[name] = uid = answer.json()["metadata"]["uid"]
            self.history[uid] = self.history[name]  # violations may name either

    async def update_app(self) -> None:
        apps = [a for a in await self._apps() if not a["metadata"].get("deleted")]
        if not apps:
            return
        app = self.rng.choice(apps)
        app["spec"]["manifest"][0]["data"] = {"v": str(self.rng.randrange(1000))}
        if app["spec"].get("placement") and self.rng.random() < 0.5:  # its shares change
            app["spec"]["manifest"][1]["spec"]["replicas"] = self.rng.choice([2, 3, 4, 6])
        answer = await self.api.put(f"{APPS}/{app['metadata']['name']}", json=app)
        self.note(app["metadata"]["name"], f"update: {answer.status_code}")

    async def delete_app(self) -> None:
        apps = await self._apps()
        if apps:
            name = self.rng.choice(apps)["metadata"]["name"]
            answer = await self.api.delete(f"{APPS}/{name}")
            self._removed(name, answer)
            self.note(name, f"delete: {answer.status_code}")

    def _removed(self, name: str, answer: httpx.Response) -> None:
        if answer.status_code in (200, 202, 404):
            self.removed.add(name)

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
        """A push cluster deleted, then registered again under its name. Not a pull
        cluster: deleting one revokes its agent's credential, and only a new join token
        brings it back (docs/pull-mode.md); the soak stops and kills agents instead."""
        if self.deleted:
            name = self.rng.choice(sorted(self.deleted))
            await self._register_again(name)
            return
        name = self.rng.choice([n for n in self.names if n not in self.pulled])
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
        elif answer.status_code == 409:
            found = await self.api.get(f"{CLUSTERS}/{name}")
            if found.status_code == 200 and not found.json()["metadata"].get("deleted"):
                del self.deleted[name]  # its delete never reached the API (it was down)
        self.note(name, f"register again: {answer.status_code} {answer.text[:120]}")

    async def create_pod(self) -> None:
        self.serial += 1
        name = f"pod-{self.serial}"
        body = {"api": "scheduling", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}  # fmt: skip
        answer = await self.api.post(PODS, json=body)
        self._acknowledged(name, answer)
        self.note(name, f"create: {answer.status_code}")

    async def delete_pod(self) -> None:
        pods = (await self.api.get(PODS)).json()["items"]
        if pods:
            name = self.rng.choice(pods)["metadata"]["name"]
            answer = await self.api.delete(f"{PODS}/{name}")
            self._removed(name, answer)
            self.note(name, f"delete: {answer.status_code}")

    async def cordon_cluster(self) -> None:
        name = self.rng.choice([n for n in self.names if n not in self.deleted])
        cordon = name not in self.cordoned
        await self._set_cordon(name, cordon, "cordon" if cordon else "uncordon")

    async def drain_cluster(self) -> None:
        """What ``shoal kube cluster drain`` does: cordon, then a task for the cluster."""
        name = self.rng.choice([n for n in self.names if n not in self.deleted])
        if name not in self.cordoned:
            await self._set_cordon(name, True, "cordon (drain)")
        await self._task({"target_clusters": [name]}, name)

    async def _set_cordon(self, name: str, cordon: bool, why: str) -> None:
        """``spec.unschedulable`` set to ``cordon`` by a read and a compare-and-swap write."""
        answer = await self.api.get(f"{CLUSTERS}/{name}")
        if answer.status_code != 200:
            return
        cluster = answer.json()
        cluster["spec"]["unschedulable"] = cordon
        answer = await self.api.put(f"{CLUSTERS}/{name}", json=cluster)
        if answer.status_code == 200:
            (self.cordoned.add if cordon else self.cordoned.discard)(name)
        self.note(name, f"{why}: {answer.status_code}")

    async def reschedule_task(self) -> None:
        apps = await self._apps()
        if apps:
            chosen = self.rng.sample(apps, min(len(apps), self.rng.randint(1, 5)))
            refs = [{"namespace": NS, "name": a["metadata"]["name"]} for a in chosen]
            await self._task({"target_ref_resource": refs}, "tasks")

    async def _task(self, spec: Obj, what: str) -> None:
        self.serial += 1
        body = {"api": "scheduling", "kind": "RescheduleTask",
                "metadata": {"name": f"task-{self.serial}"}, "spec": spec}  # fmt: skip
        answer = await self.api.post(TASKS, json=body)
        self.note(what, f"RescheduleTask task-{self.serial} {spec}: {answer.status_code}")

    async def change_metrics(self) -> None:
        """New values from the metrics provider, or the provider fails (a closed port)."""
        answer = await self.api.get(PROVIDER)
        if answer.status_code != 200:
            return
        provider = answer.json()
        if self.rng.random() < 0.3:
            provider["spec"] = {"type": "prometheus",
                                "prometheus": {"url": f"http://127.0.0.1:{free_port()}"}}
            line = "provider fails"
        else:
            provider["spec"] = self._static_metrics()
            line = "new metric values"
        answer = await self.api.put(PROVIDER, json=provider)
        self.note("metrics", f"{line}: {answer.status_code}")

    def _static_metrics(self) -> Obj:
        values = {"green_energy": round(self.rng.random(), 2)}
        values |= {f"free_capacity_{i}": round(self.rng.random(), 2) for i in range(1, 11)}
        return {"type": "static", "static": {"metrics": values}}

    async def kill(self) -> None:
        name = self.rng.choice(self.killable)
        if name == "api-2":
            if self.api_2 is not None and self.api_2.returncode is None:
                self.api_2.kill()
                self._kill_noted(name, self.api_2.pid)
                self._restart_later(self._start_api_2)
            return
        if name == "etcd":
            assert self.etcd is not None
            if len(self.etcd.running()) == len(self.etcd.members):  # keep a quorum
                member = self.rng.choice(self.etcd.members)
                pid = member.process.pid if member.process else 0
                await asyncio.to_thread(member.kill)
                self._kill_noted(f"etcd ({member.name})", pid)

                async def start() -> None:
                    member.start()

                self._restart_later(start)
            return
        self._sigkill(name)

    async def kill_agent(self) -> None:
        """A pull cluster's agent SIGKILLed (``shoal up`` starts it again: it resumes with
        its kept credential and lists its Copies again)."""
        name = f"join-{self.rng.choice(self.pulled)}"
        self._sigkill(name)

    async def pause_agent(self) -> None:
        """A pull cluster's agent stopped (SIGSTOP: as if its network were cut) for longer
        than the lease: its cluster goes OFFLINE and its shares move; then it goes on."""
        running = [n for n in self.pulled if n not in self.paused]
        if not running:
            return
        name = self.rng.choice(running)
        found = self.components().get(f"join-{name}")
        if found is None:
            return
        pid = found[0]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
            self.paused[name] = pid
            self.kills["pull-agent (stopped)"] += 1
            self.note(name, f"agent stopped (SIGSTOP {pid})")
            self.note("processes", f"SIGSTOP join-{name} ({pid})")

            async def later() -> None:
                await asyncio.sleep(self.rng.uniform(45, 60))
                self._resume(name)

            self.resumes.append(asyncio.create_task(later()))

    def _resume(self, name: str) -> None:
        pid = self.paused.pop(name, None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # killed meanwhile, and restarted
                os.kill(pid, signal.SIGCONT)
            self.note(name, f"agent goes on (SIGCONT {pid})")

    def _sigkill(self, name: str) -> None:
        """SIGKILL the running component ``name`` (none running: nothing to do), and note it."""
        found = self.components().get(name)
        if found is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(found[0], signal.SIGKILL)
                self._kill_noted(name, found[0])

    def _kill_noted(self, name: str, pid: int) -> None:
        self.kills[name.split(" ")[0]] += 1
        self.note("processes", f"SIGKILL {name} ({pid})")

    def _restart_later(self, start: Any) -> None:
        async def later() -> None:
            await asyncio.sleep(self.rng.uniform(1, 8))
            await start()

        self.restarts.append(asyncio.create_task(later()))

    ACTIONS = {
        "create_app": 30, "update_app": 10, "delete_app": 10, "reschedule_app": 3,
        "reschedule_task": 1, "create_pod": 12, "delete_pod": 5, "relabel_cluster": 4,
        "cordon_cluster": 2, "drain_cluster": 1, "change_metrics": 2, "toggle_unreachable": 3,
        "delete_cluster": 3, "kill": 3, "kill_agent": 1, "pause_agent": 1,
    }  # fmt: skip

    async def chaos(self) -> None:
        deadline = time.monotonic() + self.args.minutes * 60
        agents = ("kill_agent", "pause_agent")
        actions = {k: v for k, v in self.ACTIONS.items() if k not in agents or self.pulled}
        names, weights = zip(*actions.items(), strict=True)
        while time.monotonic() < deadline:
            action = self.rng.choices(names, weights)[0]
            self.api = self.rng.choice(self.apis)
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
        for task in self.resumes:
            task.cancel()
        for name in list(self.paused):
            self._resume(name)
        self.api = self.apis[0]
        await asyncio.gather(*self.restarts, return_exceptions=True)
        if self.etcd:
            for member in self.etcd.members:
                if not member.running():
                    member.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the metrics provider answers again
            with contextlib.suppress(httpx.HTTPError):
                provider = (await self.api.get(PROVIDER)).json()
                provider["spec"] = self._static_metrics()
                if (await self.api.put(PROVIDER, json=provider)).status_code == 200:
                    self.note("metrics", "provider answers again")
                    break
            await asyncio.sleep(1)
        deadline = time.monotonic() + 60  # its own minute: a cluster slow to go spends none
        while (self.deleted or self.cordoned) and time.monotonic() < deadline:
            for name in sorted(self.deleted):
                with contextlib.suppress(httpx.HTTPError):
                    await self._register_again(name)
            for name in sorted(self.cordoned - set(self.deleted)):
                with contextlib.suppress(httpx.HTTPError):
                    await self._set_cordon(name, False, "uncordon (heal)")
            await asyncio.sleep(1)

    # audit -----------------------------------------------------------------------------

    async def _member(self, cluster: str, path: str) -> list[Obj]:
        answer = await self.members.get(f"/clusters/{cluster}{path}")
        return list(answer.json().get("items") or []) if answer.status_code == 200 else []

    async def audit(self) -> list[tuple[str, str]]:
        """Every violated invariant: (object, what is wrong)."""
        wrong: list[tuple[str, str]] = []
        listed = (await self.api.get(CLUSTERS)).json()["items"]
        clusters = {c["metadata"]["name"]: c for c in listed}
        apps = {a["metadata"]["name"]: a for a in await self._apps()}
        online = [c for c in clusters.values() if c["status"]["state"] == "ONLINE"]
        held: dict[tuple[str, str, str], list[str]] = defaultdict(list)  # (kind, name, uid)
        replicas: dict[tuple[str, str], int] = {}  # (application, cluster) → its Deployment's
        for cluster in self.names:
            for path, kind in ((f"/api/v1/namespaces/{NS}/configmaps", "ConfigMap"),
                               (f"/apis/apps/v1/namespaces/{NS}/deployments", "Deployment")):
                for obj in await self._member(cluster, path):
                    labels = obj["metadata"].get("labels") or {}
                    if LABEL_UID not in labels:
                        continue
                    owner = labels.get(LABEL_NAME, "")
                    held[(kind, owner, labels[LABEL_UID])].append(cluster)
                    if kind == "Deployment":
                        replicas[(owner, cluster)] = int(obj["spec"].get("replicas", 1))
                    app = apps.get(owner)
                    if app is None or app["metadata"]["uid"] != labels[LABEL_UID]:
                        wrong.append((owner, f"orphan {kind} on {cluster}: application gone"))
                    elif cluster not in _runs_on(app):
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
                    wrong.append((name, f"fits nowhere but is {status['state']} "
                                        f"(on {(status.get('running_on') or {}).get('name')}; "
                                        f"{_clusters(clusters)})"))  # fmt: skip
                continue
            running = (status.get("running_on") or {}).get("name")
            if status["state"] != "RUNNING" or running != (status.get("scheduled_to") or {}).get(
                "name"
            ):
                wrong.append((name, f"fits but is {status['state']} (running on {running})"))
                continue
            expected = sorted(_runs_on(app))
            for obj in app["spec"]["manifest"]:
                where = held.get((obj["kind"], name, app["metadata"]["uid"]), [])
                if sorted(where) != expected:
                    wrong.append((name, f"{obj['kind']} on {where}, expected once on {expected}"))
            wrong += _placement_wrong(app, clusters, replicas)
        spread = [a for a in apps.values() if a["spec"].get("placement")]
        self.several = (len(spread), sum(len(_runs_on(a)) > 1 for a in spread))
        self.on_pull = sum(bool(set(_runs_on(a)) & set(self.pulled)) for a in apps.values())
        pods = {p["metadata"]["uid"]: p for p in (await self.api.get(PODS)).json()["items"]}
        members: dict[str, list[str]] = defaultdict(list)
        for cluster in self.names:
            used: Counter[tuple[str, str]] = Counter()  # (node, resource) → requested
            for member in await self._member(cluster, f"/api/v1/namespaces/{NS}/pods"):
                uid = (member["metadata"].get("annotations") or {}).get(POD_UID)
                if uid is not None:
                    members[uid].append(cluster)
                node = member["spec"].get("nodeName") or ""
                asked = pod_requests(member["spec"])
                for resource in ("cpu", "memory"):
                    used[(node, resource)] += asked.get(resource, 0)
            for node in await self._member(cluster, "/api/v1/nodes"):
                name, free = node["metadata"]["name"], node["status"].get("allocatable") or {}
                for resource in ("cpu", "memory"):
                    if used[(name, resource)] > amount(resource, free.get(resource)):
                        over = f"{used[(name, resource)]} > {free.get(resource)}"
                        wrong.append((cluster, f"node {name} over-committed: {resource} {over}"))
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
        names = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods.values()}
        names |= {name: app["metadata"]["uid"] for name, app in apps.items()}
        for name, uid in self.created.items():
            if name not in self.removed and names.get(name) != uid:
                wrong.append((name, f"acknowledged create lost (uid {uid})"))
        for task in (await self.api.get(TASKS)).json()["items"]:
            if task["status"]["phase"] != "Finished":
                wrong.append((task["metadata"]["name"], f"task {task['status']['phase']}"))
        wrong += await self._watches()
        wrong += [("API", f"answered {what} ({count}×)") for what, count in self.answers.items()
                  if not what.startswith("503 ")]  # fmt: skip
        wrong += self._unhandled()
        return wrong

    def _unhandled(self) -> list[tuple[str, str]]:
        """A 500 any client got (a component's too): the API logs each unhandled error."""
        found: list[tuple[str, str]] = []
        for log in sorted((self.data / "logs").glob("api*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if "unhandled error on" in line:
                    found.append((log.stem, line.strip()[:200]))
        return found

    async def _watches(self) -> list[tuple[str, str]]:
        """Every component's informers against the store: the newest revision of their kind
        seen, and as many objects held as the store lists."""
        wrong: list[tuple[str, str]] = []
        stores: dict[tuple[str, str], tuple[int, int]] = {}
        for name, (_pid, command) in sorted(self.components().items()):
            if "--metrics-port" not in command:
                continue
            port = command[command.index("--metrics-port") + 1]
            scrape = (self.data / "security" / "metrics.token").read_text().strip()
            try:
                async with httpx.AsyncClient(
                    timeout=5, headers={"authorization": f"Bearer {scrape}"}
                ) as http:
                    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            except httpx.HTTPError as error:
                wrong.append((name, f"metrics unreachable: {error}"))
                continue
            seen: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
            for family in text_string_to_metric_families(text):
                if family.name in ("shoal_informer_revision", "shoal_informer_objects"):
                    for sample in family.samples:
                        key = (sample.labels["kind"], sample.labels["namespace"],
                               sample.labels["informer"])  # fmt: skip
                        seen[key][family.name] = sample.value
            self.informers[name] = len(seen)
            for (kind, namespace, _n), values in seen.items():
                if (kind, namespace) not in stores:
                    api, plural = kind.split("/")
                    path = f"/{api}/namespaces/{namespace}/{plural}" if namespace \
                        else f"/{api}/{plural}"
                    items = (await self.api.get(path)).json()["items"]
                    newest = max((int(i["metadata"]["resource_version"]) for i in items),
                                 default=0)  # fmt: skip
                    stores[(kind, namespace)] = (newest, len(items))
                newest, count = stores[(kind, namespace)]
                revision, held = values["shoal_informer_revision"], values["shoal_informer_objects"]
                if revision < newest or held != count:
                    wrong.append((name, f"informer of {kind} at revision {revision:.0f} with "
                                        f"{held:.0f} objects; the store: {newest}, {count}"))
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


def _runs_on(app: Obj) -> list[str]:
    """The clusters an application runs on: each of its placements (or, while it waits, of
    its copies), or its one cluster."""
    status = app["status"]
    placed = [p["cluster"]["name"] for p in status.get("placements") or []]
    if placed:
        return placed
    # placed nowhere now (it waits): its copies may run where they ran, as one cluster's may
    ran = [c["cluster"]["name"] for c in status.get("copies") or []]
    return ran or [n for n in [(status.get("running_on") or {}).get("name")] if n]


def _placement_wrong(app: Obj, clusters: dict[str, Obj], replicas: dict[tuple[str, str], int]
                     ) -> list[tuple[str, str]]:  # fmt: skip
    """What is wrong with an application on several clusters, read on the member clusters:
    a placement on a cluster that is not ONLINE or does not fit, or Deployments whose
    replicas do not add up (divided) or are not all there on each (duplicated)."""
    placement = app["spec"].get("placement")
    if not placement:
        return []
    name, wrong = app["metadata"]["name"], []
    placed = _runs_on(app)
    labels = app["spec"]["constraints"]["cluster"]["labels"]
    for cluster in placed:
        found = clusters.get(cluster)
        if found is None or found["status"]["state"] != "ONLINE":
            wrong.append((name, f"placed on {cluster}, which is not ONLINE"))
        elif not _matches(labels, found["metadata"]["labels"]):
            wrong.append((name, f"placed on {cluster}, which no longer fits"))
    if len(placed) != len(set(placed)) or not 1 <= len(placed) <= placement["clusters"]:
        wrong.append((name, f"placed on {placed} for {placement['clusters']} clusters"))
    total = next(int(o["spec"]["replicas"]) for o in app["spec"]["manifest"]
                 if o["kind"] == "Deployment")  # fmt: skip
    counts = [replicas.get((name, cluster), 0) for cluster in placed]
    if placement["replicas"] == "divided" and sum(counts) != total:
        wrong.append((name, f"divided replicas {counts} on {placed} do not add up to {total}"))
    if placement["replicas"] == "duplicated" and set(counts) != {total}:
        wrong.append((name, f"duplicated replicas {counts} on {placed}, expected {total} each"))
    return wrong


def _clusters(clusters: dict[str, Obj]) -> str:
    """Each cluster's state, labels and failing metrics (their reasons' codes), as the
    audit saw them."""
    return ", ".join(
        f"{name} {c['status']['state']} {c['metadata']['labels']}"
        + "".join(f" {metric}:{reason.get('code')}"
                  for metric, reason in sorted((c["status"].get("metrics_reasons") or {}).items()))
        for name, c in sorted(clusters.items())
    )  # fmt: skip


def _pull_count(clusters: int) -> int:
    """How many of ``clusters`` join in pull mode: a third (none of one alone)."""
    return clusters // 3 if clusters >= 3 else 0


def _log_file(path: Path, mode: str = "wb") -> Any:
    return path.open(mode)  # kept open for the process's life


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
    tmp = Path(tempfile.mkdtemp(prefix="shoal-soak-"))
    with contextlib.ExitStack() as stack:
        etcd = stack.enter_context(running_etcd_cluster()) if args.store == "etcd" else None
        soak = Soak(args, tmp, etcd)
        try:
            await soak.start_up()
            await soak.chaos()
            await soak.heal()
            took, wrong = await soak.settle()
            left = soak.components()
        finally:
            await soak.stop_up()
        store = "a three-member etcd, two API servers" if etcd else "SQLite"
        print(f"\nShoal soak — seed {args.seed}, {args.minutes:g} min, {args.clusters} clusters "
              f"({len(soak.pulled)} in pull mode), {store}")  # fmt: skip
        print("actions: " + ", ".join(f"{k} {v}" for k, v in sorted(soak.actions.items())))
        print("kills:   " + (", ".join(f"{k} {v}" for k, v in sorted(soak.kills.items()))
                             or "none"))  # fmt: skip
        unavailable = sum(n for what, n in soak.answers.items() if what.startswith("503 "))
        if unavailable:
            print(f"answered 503 (store unavailable, etcd electing a leader): {unavailable}")
        if soak.errors:
            print("refused while a component was down: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(soak.errors.items())))
        print(f"components running at the end: {', '.join(sorted(left))}")
        print(f"applications on several clusters at the end: {soak.several[0]} "
              f"({soak.several[1]} running on two)")  # fmt: skip
        print(f"applications on pull clusters ({', '.join(soak.pulled) or 'none'}) at the end: "
              f"{soak.on_pull}")  # fmt: skip
        print("informers compared with the store: "
              + ", ".join(f"{k} {v}" for k, v in sorted(soak.informers.items())))  # fmt: skip
        if soak.deleted or soak.cordoned:  # the world was not whole when settling began
            print(f"not healed: deleted {sorted(soak.deleted)}, cordoned {sorted(soak.cordoned)}")
        if not wrong:
            print(f"settled in {took:.1f} s (bound {args.settle:g} s): every invariant holds")
            shutil.rmtree(tmp, ignore_errors=True)
            return 0
        print(f"NOT settled after {took:.1f} s: {len(wrong)} violation(s); logs in {tmp}/logs")
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
    parser.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--log-level", default="warning", help="of every component")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
