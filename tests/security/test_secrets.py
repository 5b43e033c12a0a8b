"""Secrets: encrypted in the SQLite file and in etcd, redacted without the secrets verb."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from shoal.api.auth import protect
from shoal.api.auth.secrets import REDACTED, Cipher, new_key
from shoal.api.auth.store import SecuredStore, reencrypt
from shoal.api.server import start_api
from shoal.store.factory import open_store
from tests.fixtures.etcd import etcd_available, running_etcd
from tests.security.conftest import Secured, cluster, eventually, grant, role, security

SECRET = "bob-very-secret-token"


def _raw_files(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


async def test_sqlite_holds_no_secret_in_clear(secured: Secured) -> None:
    bob = secured["bob"]
    assert (
        await bob.post("/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", SECRET))
    ).status_code == 200
    answer = await bob.get("/kubernetes/namespaces/b/clusters/c1")
    assert answer.json()["spec"]["kubeconfig"]["users"][0]["user"]["token"] == SECRET
    raw = _raw_files(secured.db.parent)
    assert SECRET.encode() not in raw
    assert base64.b64encode(SECRET.encode()) not in raw
    assert b"shoal:aesgcm:v1:" in raw


async def test_redacted_without_the_secrets_verb_and_kept_on_put(secured: Secured) -> None:
    admin, bob = secured["admin"], secured["bob"]
    await bob.post("/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", SECRET))
    verbs = ("get", "list", "list_all", "watch", "update")
    await grant(
        admin, "alice", role("cluster-editor-b", "kubernetes", ("clusters",), ("b",), verbs)
    )
    alice = secured["alice"]

    async def readable() -> bool:
        return (await alice.get("/kubernetes/namespaces/b/clusters/c1")).status_code == 200

    await eventually(readable)
    for path in ("/kubernetes/namespaces/b/clusters/c1",):
        body = (await alice.get(path)).json()
        assert body["spec"]["kubeconfig"]["users"][0]["user"]["token"] == REDACTED
    for path in ("/kubernetes/namespaces/b/clusters", "/kubernetes/clusters"):
        text = (await alice.get(path)).text
        assert SECRET not in text and REDACTED in text
    body = (await alice.get("/kubernetes/namespaces/b/clusters/c1")).json()
    body["metadata"]["labels"] = {"zone": "x"}
    answer = await alice.put("/kubernetes/namespaces/b/clusters/c1", json=body)
    assert answer.status_code == 200, answer.text
    assert SECRET not in answer.text
    # the kube controller's role has the secrets verb on clusters: the stored value is intact
    kube = secured["system:kube-controller"]
    stored = (await kube.get("/kubernetes/namespaces/b/clusters/c1")).json()
    assert stored["spec"]["kubeconfig"]["users"][0]["user"]["token"] == SECRET
    assert stored["metadata"]["labels"] == {"zone": "x"}


async def test_key_rotation_reencrypts(tmp_path: Path) -> None:
    old, new = new_key(), new_key()
    store = open_store(f"sqlite://{tmp_path / 's.db'}")
    sealed = SecuredStore(store, Cipher([base64.b64decode(old)]))
    key = "/kubernetes/clusters/b/c1"
    import orjson

    await sealed.create(key, orjson.dumps(cluster("c1", "b", SECRET)))
    ring = Cipher([base64.b64decode(new), base64.b64decode(old)])
    assert await reencrypt(store, ring) == 1
    assert await reencrypt(store, ring) == 0
    only_new = SecuredStore(store, Cipher([base64.b64decode(new)]))
    data = orjson.loads((await only_new.get(key)).value)
    assert data["spec"]["kubeconfig"]["users"][0]["user"]["token"] == SECRET
    await store.close()


@pytest.mark.integration
@pytest.mark.skipif(not etcd_available(), reason="no etcd binary")
async def test_etcd_holds_no_secret_in_clear(tmp_path: Path) -> None:
    with running_etcd(tmp_path / "etcd") as etcd:
        server = await start_api(etcd.url, security=security(tmp_path))
        try:
            import httpx

            headers = {"authorization": "Bearer bob-token"}
            async with httpx.AsyncClient(base_url=server.url, headers=headers) as bob:
                admin_headers = {"authorization": "Bearer admin-token"}
                async with httpx.AsyncClient(base_url=server.url, headers=admin_headers) as admin:
                    await grant(admin, "bob", role("t", namespaces=("b",)))

                async def created() -> bool:
                    answer = await bob.post(
                        "/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", SECRET)
                    )
                    return answer.status_code == 200

                await eventually(created)
                got = (await bob.get("/kubernetes/namespaces/b/clusters/c1")).json()
                assert got["spec"]["kubeconfig"]["users"][0]["user"]["token"] == SECRET
        finally:
            await server.stop()
        assert SECRET.encode() not in _raw_files(etcd.data_dir)
        assert b"shoal:aesgcm:v1:" in _raw_files(etcd.data_dir)


def test_protect_without_key_encrypts_nothing(tmp_path: Path) -> None:
    store = open_store("sqlite://:memory:")
    sealed = protect(security(tmp_path, secrets_key_file=None, secrets_key_env=None), store).store
    assert isinstance(sealed, SecuredStore) and sealed.cipher is None


async def test_a_token_that_looks_sealed_is_sealed_and_breaks_no_list(secured: Secured) -> None:
    """A tenant's token spelled like a sealed value is still the tenant's own value: stored
    sealed, read back as sent, and every reader of a list it is in still gets an answer."""
    bob = secured["bob"]
    ring = Cipher([base64.b64decode(new_key())])
    looks_sealed = [
        "shoal:aesgcm:v1:deadbeef:AAAA",  # a key the ring does not hold
        ring.encrypt("x", b"/kubernetes/clusters/b/c1"),  # another ring's
        "shoal:aesgcm:v1:",
    ]
    for index, token in enumerate(looks_sealed):
        name = f"c{index}"
        answer = await bob.post("/kubernetes/namespaces/b/clusters", json=cluster(name, "b", token))
        assert answer.status_code == 200, answer.text
        got = await bob.get(f"/kubernetes/namespaces/b/clusters/{name}")
        assert got.status_code == 200
        assert got.json()["spec"]["kubeconfig"]["users"][0]["user"]["token"] == token
    kube = secured["system:kube-controller"]
    listed = await kube.get("/kubernetes/clusters")
    assert listed.status_code == 200
    tokens = {i["metadata"]["name"]: i["spec"]["kubeconfig"]["users"][0]["user"]["token"]
              for i in listed.json()["items"]}  # fmt: skip
    assert tokens == {f"c{i}": t for i, t in enumerate(looks_sealed)}
    # in the file, each sealed by the API's key, none as sent
    raw = _raw_files(secured.db.parent)
    assert b"deadbeef:AAAA" not in raw


def test_a_sealed_value_opens_only_under_its_own_key_and_ring() -> None:
    old, new = base64.b64decode(new_key()), base64.b64decode(new_key())
    ring = Cipher([new, old])
    sealed = Cipher([old]).encrypt({"token": "t"}, b"/kubernetes/clusters/b/c1")
    assert ring.decrypt(sealed, b"/kubernetes/clusters/b/c1") == {"token": "t"}
    assert ring.sealed_for(sealed, b"/kubernetes/clusters/b/c1")
    assert not ring.sealed_for(sealed, b"/kubernetes/clusters/b/c2")  # moved to another key
    assert not Cipher([new]).sealed_for(sealed, b"/kubernetes/clusters/b/c1")  # key dropped
    assert not ring.sealed_for("plain", b"/kubernetes/clusters/b/c1")
    assert ring.decrypt("plain", b"k") == "plain"  # stored before encryption was on
    assert ring.key_id(sealed) == Cipher([old]).current != ring.current
    assert ring.key_id(ring.encrypt("v", b"k")) == ring.current
    assert ring.key_id("plain") is None
    with pytest.raises(ValueError, match="no key"):
        Cipher([])
    with pytest.raises(ValueError, match="32 bytes"):
        Cipher([new, b"short"])
