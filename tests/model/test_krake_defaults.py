"""Objects stored with null where Krake has a default load with Krake's default."""

from __future__ import annotations

import orjson

from shoal.api.codec import decode, encode
from shoal.model.base import TRUSTED
from shoal.model.kubernetes import Application, Cluster


def test_stored_nulls_read_as_krake_defaults() -> None:
    cluster = {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": "old", "namespace": "default"},
        "spec": {"kubeconfig": None, "tosca": None},
        "status": {"last_applied_tosca": None, "retries": None},
    }
    for loaded in (
        decode(Cluster, orjson.dumps(cluster), 3),
        Cluster.model_validate(cluster, context=TRUSTED),
    ):
        assert loaded.spec.kubeconfig is None
        assert loaded.spec.tosca == {}
        assert loaded.status.last_applied_tosca == {}
        assert loaded.status.retries == 0
        wire = orjson.loads(encode(loaded))
        assert wire["spec"]["kubeconfig"] == {} and wire["spec"]["tosca"] == {}
        assert wire["status"]["last_applied_tosca"] == {} and wire["status"]["retries"] == 0
    app = {
        "api": "kubernetes",
        "kind": "Application",
        "metadata": {"name": "old", "namespace": "default"},
        "spec": {"manifest": [], "tosca": None},
    }
    assert decode(Application, orjson.dumps(app), 1).spec.tosca == {}
