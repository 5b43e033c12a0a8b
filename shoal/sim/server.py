"""`shoal sim`: many simulated Kubernetes clusters behind one HTTP port.

Each cluster is served under ``{url}/clusters/{name}`` with a Kubernetes-compatible
API (kubectl and kubernetes_asyncio work against it), fake nodes, and simulated
controllers (Deployments → ReplicaSets → Pods, StatefulSets, DaemonSets, Jobs, a
scheduler and a kubelet that starts pods after ``pod_start_delay`` seconds).
An admin API under ``{url}/admin`` adds clusters and injects faults.

Python use (in an async test)::

    from shoal.sim.server import start_sim

    sim = await start_sim(clusters=2, nodes=5)          # clusters sim-0, sim-1
    kubeconfig = sim.clusters.kubeconfig("sim-0")       # dict, one cluster/user/context
    sim.clusters.add_cluster("edge", nodes=3, node_labels={"tier": "edge"})
    sim.clusters.set_unreachable("edge", True)          # clients now get connection errors
    sim.clusters.set_node_fault("sim-0", "n-1", not_ready=True)
    sim.clusters.clear_faults("sim-0")
    await sim.stop()

``start_sim`` runs uvicorn on the current event loop, so a test must not block that
loop (run kubectl with ``asyncio.create_subprocess_exec``). ``SimThread`` runs the
same server on a background thread for synchronous code.

Admin API (JSON). Every admin request carries the simulator's admin token
(``Authorization: Bearer TOKEN``; without it, 401): it serves every cluster's
kubeconfig and makes and deletes clusters. ``start_sim`` makes a token unless it
is given one (``sim.admin_token``, ``sim.admin_headers``); ``shoal up`` gives its
simulator one and keeps it in ``DATA_DIR/sim.token`` for the ``sim`` provider and
``shoal sim fault``/``list``.

- ``GET  /admin/clusters`` → ``{"clusters": [{name, nodes, ready_nodes, pods, faults}, …]}``
- ``POST /admin/clusters`` ``{"name", "nodes", "labels", "cpu", "memory", "max_pods",
  "region", "token"}`` → 201 ``{"cluster": {...}, "kubeconfig": {...}}``
- ``GET  /admin/clusters/{name}`` / ``DELETE /admin/clusters/{name}``
- ``PATCH /admin/clusters/{name}`` ``{"nodes": 5}`` grows or shrinks the cluster
- ``GET  /admin/clusters/{name}/kubeconfig``
- ``GET  /admin/clusters/{name}/requests`` → ``{"requests": [{time, method, path,
  user_agent, peer}, …]}``: the last 10,000 calls of its Kubernetes API, newest last (who
  reached the cluster: Shoal's processes name themselves and their pid in the user agent)
- ``POST /admin/clusters/{name}/faults`` ``{"unreachable": true}``, ``{"latency": 0.5}``
  (every answer of the cluster's Kubernetes API comes that many seconds late) or
  ``{"node": "n-3", "not_ready": true, "memory_pressure": true, "removed": true}``
- ``DELETE /admin/clusters/{name}/faults[?node=n-3]`` clears faults
- ``POST /admin/delay`` ``{"seconds": 2}``: every admin answer comes that much later (a
  create is done at once, its answer is late): a slow or hanging infrastructure provider
- ``POST /admin/clusters/{name}/compact`` forgets watch history (watches from older
  resourceVersions then get 410 Gone)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import secrets
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Unpack, cast

import orjson
import yaml

from shoal.machinery.files import write_atomically
from shoal.machinery.server import Served, listen, serve
from shoal.machinery.tls import Tls
from shoal.machinery.types import Obj
from shoal.sim.cluster import ClusterOptions, SimCluster
from shoal.sim.nodes import mixed_site
from shoal.sim.rest import ClusterApi, Receive, Request, Scope, Send, respond, respond_error
from shoal.sim.store import ApiError


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ApiError(422, "Invalid", f"must be true or false, not {value!r}"[:200])
    return value


# cluster options the admin API takes, and how each is read from the JSON body
_ADMIN_OPTIONS: dict[str, Any] = {
    "cpu": str, "memory": str, "max_pods": int, "region": str,
    "pod_start_delay": float, "job_duration": float, "token": str, "system_pods": _flag,
}


class SimClusters:
    """All simulated clusters of one server, and the ASGI app that serves them."""

    def __init__(
        self,
        url: str = "",
        pod_start_delay: float = 0.5,
        job_duration: float = 1.0,
        admin_token: str | None = None,
        system_pods: bool = False,
    ) -> None:
        self.url = url.rstrip("/")
        self.system_pods = system_pods  # clusters get kube-system's pods unless told otherwise
        self.admin_token = admin_token or new_admin_token()
        self.pod_start_delay = pod_start_delay
        self.job_duration = job_duration
        self.clusters: dict[str, SimCluster] = {}
        self._apis: dict[str, ClusterApi] = {}
        self.ca_data: str | None = None  # base64 PEM of the CA of an HTTPS fleet
        self.admin_delay = 0.0  # seconds before each admin answer (POST /admin/delay)

    # -- clusters --------------------------------------------------------------

    def add_cluster(self, name: str, nodes: int = 3,
                    **options: Unpack[ClusterOptions]) -> SimCluster:
        """Create a cluster with ``nodes`` nodes (8 cpu, 32Gi unless ``options`` say else)."""
        if name in self.clusters:
            raise ValueError(f"cluster {name!r} already exists")
        if not name or "/" in name:
            raise ValueError(f"invalid cluster name {name!r}")
        if options.get("pod_start_delay") is None:
            options["pod_start_delay"] = self.pod_start_delay
        if options.get("job_duration") is None:
            options["job_duration"] = self.job_duration
        if options.get("system_pods") is None:
            options["system_pods"] = self.system_pods
        cluster = SimCluster(name, nodes, **options)
        self.clusters[name] = cluster
        self._apis[name] = ClusterApi(cluster)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            cluster.start()
        return cluster

    async def remove_cluster(self, name: str) -> None:
        cluster = self.cluster(name)
        del self.clusters[name]
        del self._apis[name]
        await cluster.stop()

    def cluster(self, name: str) -> SimCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise KeyError(f"no simulated cluster {name!r}") from None

    def server_url(self, name: str) -> str:
        if not self.url:
            raise RuntimeError("the fleet is not served yet (use start_sim)")
        return f"{self.url}/clusters/{name}"

    def kubeconfig(self, name: str) -> Obj:
        """A kubeconfig with exactly one cluster, one user (bearer token) and one context."""
        cluster = self.cluster(name)
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": self._cluster_entry(name)}],
            "users": [{"name": f"{name}-admin", "user": {"token": cluster.token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin",
                                                   "namespace": "default"}}],
            "current-context": name,
            "preferences": {},
        }

    def _cluster_entry(self, name: str) -> Obj:
        entry: Obj = {"server": self.server_url(name)}
        if self.ca_data is not None:
            entry["certificate-authority-data"] = self.ca_data
        return entry

    def write_kubeconfigs(self, out_dir: str | Path,
                          names: Iterable[str] | None = None) -> dict[str, Path]:
        """Write ``{out_dir}/{name}.yaml`` for each cluster; returns the paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name in names or list(self.clusters):
            path = out / f"{name}.yaml"
            write_atomically(path, yaml.safe_dump(self.kubeconfig(name), sort_keys=False))
            written[name] = path
        return written

    # -- faults ----------------------------------------------------------------

    def set_unreachable(self, name: str, unreachable: bool = True) -> None:
        """Make a cluster drop every connection (clients see network errors)."""
        self.cluster(name).set_unreachable(unreachable)

    def set_latency(self, name: str, seconds: float) -> None:
        """Answer each of the cluster's Kubernetes API requests ``seconds`` late."""
        self.cluster(name).fault_injector.latency = seconds

    def set_node_fault(
        self,
        name: str,
        node: str,
        not_ready: bool | None = None,
        memory_pressure: bool | None = None,
        removed: bool | None = None,
    ) -> None:
        """Mark a node NotReady / under MemoryPressure / removed (None leaves as is)."""
        self.cluster(name).set_node_fault(node, not_ready, memory_pressure, removed)

    def clear_faults(self, name: str, node: str | None = None) -> None:
        self.cluster(name).clear_faults(node)

    def summary(self) -> list[Obj]:
        return [c.summary() for c in self.clusters.values()]

    # -- ASGI ------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    for c in self.clusters.values():
                        await c.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path.startswith("/clusters/"):
            name, _, rest = path[len("/clusters/"):].partition("/")
            api = self._apis.get(name)
            if api is None:
                await respond_error(send, ApiError(404, "NotFound",
                                                   f"no simulated cluster {name!r}"))
                return
            await api(Request(scope, receive, send, "/" + rest))
            return
        req = Request(scope, receive, send, path)
        try:
            if path.startswith("/admin"):
                self._authorise(req)
                await self._admin(req, [p for p in path.split("/") if p][1:])
            elif path in ("/", "/healthz"):
                await respond(send, 200, {"clusters": sorted(self.clusters)})
            else:
                raise ApiError(404, "NotFound", f"no such path {path}")
        except ApiError as err:
            await respond_error(send, err)

    def _authorise(self, req: Request) -> None:
        """The admin API answers only its token's holder (compared in constant time)."""
        scheme, _, given = req.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.admin_token.encode()
        ):
            return
        raise ApiError(401, "Unauthorized", "the simulator's admin API needs its token: "
                       "Authorization: Bearer TOKEN (shoal up keeps it in DATA_DIR/sim.token)")

    async def _admin(self, req: Request, parts: list[str]) -> None:
        m = req.method
        if parts == ["delay"] and m == "POST":
            body = await req.json()
            seconds = body.get("seconds") if isinstance(body, dict) else None
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
                raise ApiError(422, "Invalid", "seconds: must be a number, 0 or more")
            self.admin_delay = float(seconds)
            await respond(req.send, 200, {"seconds": self.admin_delay})
            return
        if parts[:1] != ["clusters"]:
            raise ApiError(404, "NotFound", "no such admin path")
        if len(parts) == 1:
            if m == "GET":
                await respond(req.send, 200, {"clusters": self.summary()})
                return
            if m == "POST":
                body = await req.json()
                if not isinstance(body, dict) or not body.get("name"):
                    raise ApiError(422, "Invalid", "name is required")
                options = {key: convert(body[key]) for key, convert in _ADMIN_OPTIONS.items()
                           if body.get(key) is not None}
                options["node_labels"] = body.get("labels") or body.get("node_labels")
                try:
                    cluster = self.add_cluster(str(body["name"]), int(body.get("nodes", 3)),
                                               **cast(ClusterOptions, options))
                except ValueError as exc:
                    raise ApiError(409, "AlreadyExists", str(exc)) from exc
                await asyncio.sleep(self.admin_delay)  # made at once, answered late
                await respond(req.send, 201, {"cluster": cluster.summary(),
                                              "kubeconfig": self.kubeconfig(cluster.name)})
                return
            raise ApiError(405, "MethodNotAllowed", f"method {m} not allowed")
        await asyncio.sleep(self.admin_delay)
        name = parts[1]
        if name not in self.clusters:
            raise ApiError(404, "NotFound", f"no simulated cluster {name!r}")
        cluster = self.clusters[name]
        rest = parts[2:]
        if not rest:
            if m == "GET":
                await respond(req.send, 200, cluster.summary())
            elif m == "DELETE":
                await self.remove_cluster(name)
                await respond(req.send, 200, {"deleted": name})
            elif m == "PATCH":
                body = await req.json()
                nodes = body.get("nodes") if isinstance(body, dict) else None
                if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 0:
                    raise ApiError(422, "Invalid", "nodes: must be a whole number, 0 or more")
                cluster.resize(nodes)
                await respond(req.send, 200, cluster.summary())
            else:
                raise ApiError(405, "MethodNotAllowed", f"method {m} not allowed")
        elif rest == ["kubeconfig"]:
            await respond(req.send, 200, self.kubeconfig(name))
        elif rest == ["requests"] and m == "GET":
            await respond(req.send, 200, {"requests": list(cluster.requests)})
        elif rest == ["compact"] and m == "POST":
            cluster.store.compact()
            await respond(req.send, 200, {"resourceVersion": str(cluster.store.rv)})
        elif rest == ["faults"]:
            if m == "GET":
                pass
            elif m == "POST":
                await self._fault(cluster, await req.json())
            elif m == "DELETE":
                cluster.clear_faults(req.query.get("node") or None)
            else:
                raise ApiError(405, "MethodNotAllowed", f"method {m} not allowed")
            await respond(req.send, 200, cluster.faults())
        else:
            raise ApiError(404, "NotFound", "no such admin path")

    @staticmethod
    async def _fault(cluster: SimCluster, body: Any) -> None:
        if not isinstance(body, dict):
            raise ApiError(422, "Invalid", "a fault must be a JSON object")
        if "unreachable" in body:
            cluster.set_unreachable(bool(body["unreachable"]))
        if "reachable" in body:
            cluster.set_unreachable(not bool(body["reachable"]))
        if "latency" in body:
            seconds = body["latency"]
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                raise ApiError(422, "Invalid", "latency: must be a number of seconds, 0 or more")
            cluster.fault_injector.latency = float(seconds)
        node = body.get("node")
        if node:
            def opt(key: str, inverse: str | None = None) -> bool | None:
                if key in body:
                    return bool(body[key])
                if inverse and inverse in body:
                    return not bool(body[inverse])
                return None

            try:
                cluster.set_node_fault(
                    str(node),
                    not_ready=opt("not_ready", "ready"),
                    memory_pressure=opt("memory_pressure"),
                    removed=opt("removed"),
                )
            except KeyError as exc:
                raise ApiError(404, "NotFound", f"no node {node!r} in {cluster.name}") from exc


class SimServer:
    """Running simulated clusters: ``url`` (base), ``clusters``, and ``stop()``."""

    def __init__(self, fleet: SimClusters, served: Served) -> None:
        self.clusters = fleet
        self.url = fleet.url
        self._served = served

    @property
    def admin_token(self) -> str:
        """The token every admin request carries."""
        return self.clusters.admin_token

    @property
    def admin_headers(self) -> dict[str, str]:
        """The headers of an admin request: its token."""
        return admin_headers(self.clusters.admin_token)

    @property
    def port(self) -> int:
        return int(self._served.sock.getsockname()[1])

    def kubeconfig(self, name: str) -> Obj:
        return self.clusters.kubeconfig(name)

    async def stop(self) -> None:
        for c in self.clusters.clusters.values():
            c.store.close_watches()
        await self._served.stop(wait=5)
        for c in self.clusters.clusters.values():
            await c.stop()


def new_admin_token() -> str:
    return secrets.token_urlsafe(32)


def admin_headers(token: str) -> dict[str, str]:
    """The headers of a request to the admin API of a simulator whose token is ``token``."""
    return {"Authorization": f"Bearer {token}"}


def cluster_names(clusters: int | Iterable[str], prefix: str = "sim-") -> list[str]:
    if isinstance(clusters, int):
        return [f"{prefix}{i}" for i in range(clusters)]
    return list(clusters)


async def start_sim(
    host: str = "127.0.0.1",
    port: int = 0,
    clusters: int | Iterable[str] = 1,
    nodes: int = 3,
    name_prefix: str = "sim-",
    node_labels: dict[str, str] | None = None,
    cpu: str = "8",
    memory: str = "32Gi",
    pod_start_delay: float = 0.5,
    job_duration: float = 1.0,
    out_dir: str | Path | None = None,
    tls: Tls | None = None,
    ca: bytes | None = None,
    mixed: bool = False,
    admin_token: str | None = None,
    system_pods: bool = False,
) -> SimServer:
    """Serve a fleet on the running loop; ``clusters`` is a count or a list of names.

    ``tls``: serve HTTPS with that certificate; ``ca``: the PEM of the CA that signed it, put in
    the kubeconfigs (``certificate-authority-data``) so kubectl and controllers trust it.
    ``mixed``: nodes of mixed sizes, one in ten tainted, each cluster at a site of its own
    (``shoal.sim.nodes.MIXED``, ``SITES``), for fleet pods (docs/fleet.md).
    ``admin_token``: the admin API's token (a new random one when None: ``sim.admin_token``).
    ``system_pods``: every cluster, those added later included, runs kube-system's pods as a
    fresh cluster does (``shoal.sim.system_pods``; a cluster added with ``system_pods``
    false does not).
    """
    sock = listen(host, port, 1024)
    bound = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    scheme = "https" if tls is not None else "http"
    fleet = SimClusters(f"{scheme}://{url_host}:{bound}", pod_start_delay, job_duration,
                     admin_token, system_pods)  # fmt: skip
    if ca is not None:
        fleet.ca_data = base64.b64encode(ca).decode()
    for i, name in enumerate(cluster_names(clusters, name_prefix)):
        if not mixed:
            fleet.add_cluster(name, nodes=nodes, node_labels=node_labels, cpu=cpu, memory=memory)
            continue
        site, where = mixed_site(i)
        fleet.add_cluster(name, nodes=nodes, node_labels={**(node_labels or {}), "geo": site},
                          mixed=True, site=where)
    if out_dir is not None:
        fleet.write_kubeconfigs(out_dir)
    # httptools parses requests in C: h11 was 10 % of the simulator's time under a burst.
    return SimServer(fleet, await serve(fleet, sock, host, tls=tls, http="httptools"))


class SimThread:
    """``start_sim`` on a background thread with its own loop, for synchronous callers.

    Use ``call(fn, *args)`` to run fleet methods (faults, add_cluster) on the server's
    loop; fleet objects are not thread-safe.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shoal-sim", daemon=True)
        self._sim: SimServer | None = None
        self._error: BaseException | None = None
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        if self._sim is None:
            raise RuntimeError("sim server did not start")
        self.url = self._sim.url
        self.clusters = self._sim.clusters
        self.admin_token = self._sim.admin_token
        self.admin_headers = self._sim.admin_headers

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def boot() -> None:
            try:
                self._sim = await start_sim(**self._kwargs)
            except BaseException as exc:
                self._error = exc
            finally:
                self._ready.set()

        self._loop.run_until_complete(boot())
        if self._sim is not None:
            self._loop.run_forever()

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def stop(self) -> None:
        if self._sim is None:
            return
        sim = self._sim
        asyncio.run_coroutine_threadsafe(sim.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._sim = None

    def __enter__(self) -> SimThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)
