"""What a fresh cluster runs in ``kube-system``, as kubeadm and minikube set it up.

Tools that look at a new cluster expect it not to be empty: ``kubectl get pods
--all-namespaces`` prints its table (and its ``NAMESPACE`` header) only when some
pod exists, and dashboards count DNS and proxy pods. A simulated cluster made with
``system_pods`` gets, through its own controllers like any workload:

- the ``coredns`` Deployment (two replicas, ``k8s-app: kube-dns``) and its
  ``kube-dns`` Service;
- the ``kube-proxy`` DaemonSet: one pod per node, new nodes included;
- the control plane's static pods on the first node (``etcd-<node>``,
  ``kube-apiserver-<node>``, ``kube-controller-manager-<node>``,
  ``kube-scheduler-<node>``), owned by their Node as a kubelet's mirror pods are,
  and ``storage-provisioner`` as minikube adds it.

Their requests are kubeadm's: they take the same small share of the nodes as on a
real cluster, so what Shoal's observer reports free is what tenants really have.
"""

from __future__ import annotations

from shoal.machinery.types import Obj

NAMESPACE = "kube-system"
VERSION = "v1.32.0"
CONTROL_PLANE = (
    # (name, image, cpu request, memory request)
    ("etcd", "registry.k8s.io/etcd:3.5.16-0", "100m", "100Mi"),
    ("kube-apiserver", f"registry.k8s.io/kube-apiserver:{VERSION}", "250m", None),
    ("kube-controller-manager", f"registry.k8s.io/kube-controller-manager:{VERSION}", "200m",
     None),
    ("kube-scheduler", f"registry.k8s.io/kube-scheduler:{VERSION}", "100m", None),
)  # fmt: skip
_CRITICAL = {"priorityClassName": "system-node-critical"}


def _requests(cpu: str | None, memory: str | None) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"requests": requests} if requests else {}


def coredns() -> tuple[Obj, Obj]:
    """The DNS Deployment and its Service."""
    labels = {"k8s-app": "kube-dns"}
    container = {
        "name": "coredns",
        "image": "registry.k8s.io/coredns/coredns:v1.11.3",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                  {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"}],
        "resources": {"limits": {"memory": "170Mi"}, **_requests("100m", "70Mi")},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"priorityClassName": "system-cluster-critical",
                         "serviceAccountName": "coredns", "containers": [container]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "selector": dict(labels),
            "clusterIP": "10.96.0.10",
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                      {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}],
        },
    }
    return deployment, service


def kube_proxy() -> Obj:
    """The proxy DaemonSet: one pod on every node."""
    labels = {"k8s-app": "kube-proxy"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "kube-proxy", "namespace": NAMESPACE, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "hostNetwork": True,
                    "serviceAccountName": "kube-proxy",
                    "containers": [{
                        "name": "kube-proxy",
                        "image": f"registry.k8s.io/kube-proxy:{VERSION}",
                        "command": ["/usr/local/bin/kube-proxy",
                                    "--config=/var/lib/kube-proxy/config.conf"],
                    }],
                    "tolerations": [{"operator": "Exists"}],
                },
            },
        },
    }


def static_pods(node: Obj) -> list[Obj]:
    """The control plane's pods on ``node``, bound to it from the start."""
    name = node["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": name,
             "uid": node["metadata"].get("uid", ""), "controller": True}  # fmt: skip
    pods = []
    for component, image, cpu, memory in CONTROL_PLANE:
        pods.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{component}-{name}",
                "namespace": NAMESPACE,
                "labels": {"component": component, "tier": "control-plane"},
                "annotations": {"kubernetes.io/config.source": "file"},
                "ownerReferences": [dict(owner)],
            },
            "spec": {
                "nodeName": name,
                "hostNetwork": True,
                **_CRITICAL,
                "containers": [{"name": component, "image": image,
                                "resources": _requests(cpu, memory)}],
            },
        })  # fmt: skip
    pods.append({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "storage-provisioner", "namespace": NAMESPACE,
                     "labels": {"integration-test": "storage-provisioner"}},
        "spec": {"nodeName": name, "hostNetwork": True, "serviceAccountName":
                 "storage-provisioner", "containers": [{
                     "name": "storage-provisioner",
                     "image": "gcr.io/k8s-minikube/storage-provisioner:v5"}]},
    })  # fmt: skip
    return pods
