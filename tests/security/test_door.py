"""One parser at the door: a body means the same to the guard and to the route; query
parameters are read once; lists are paged and watches beat no faster than the floor."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import orjson

from shoal.api.auth.config import Limits
from shoal.api.auth.secrets import REDACTED
from shoal.api.body import MAX_DEPTH
from shoal.api.server import start_api
from shoal.client.rest import ShoalClient
from shoal.model.kubernetes import Application
from shoal.testing.wait import wait_for
from tests.api.conftest import start_watch
from tests.security.conftest import (
    Secured,
    application,
    cluster,
    eventually,
    grant,
    role,
    secured_admin,
    security,
)

BATCHES = {
    "/scheduling/applicationfinalizers": ("items", {"finalizers": ["bob.was/here"]}),
    "/scheduling/applicationstatuses": ("items", {"status": {"retries": 7}}),
    "/scheduling/reschedules": ("items", {"requested": "2030-01-01T00:00:00Z"}),
    "/scheduling/podstatuses": ("items", {"uid": "x", "status": {"phase": "Failed"}}),
    "/scheduling/bindings": (
        "bindings",
        {"cluster": {"api": "kubernetes", "kind": "Cluster", "namespace": "a", "name": "c"}},
    ),
}


async def _alices_app(secured: Secured) -> dict[str, object]:
    answer = await secured["alice"].post(
        "/kubernetes/namespaces/a/applications", json=application("alice-app", "a")
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def _unchanged(secured: Secured, before: dict[str, object]) -> None:
    after = (await secured["admin"].get("/kubernetes/namespaces/a/applications/alice-app")).json()
    assert after["metadata"]["resource_version"] == before["metadata"]["resource_version"]  # type: ignore[index]


async def test_a_body_that_two_parsers_read_differently_is_refused(secured: Secured) -> None:
    before = await _alices_app(secured)
    bob = secured["bob"]
    headers = {"content-type": "application/json"}
    for path, (field, extra) in BATCHES.items():
        item = orjson.dumps({"namespace": "a", "name": "alice-app", **extra})
        for body in (
            b'{"%s": NaN, "%s": [%s]}' % (field.encode(), field.encode(), item),
            b'{"%s": [], "%s": [%s]}' % (field.encode(), field.encode(), item),
            b'{"%s": [{"namespace": "b", "namespace": "a", "name": "alice-app"}]}' % field.encode(),
        ):
            answer = await bob.post(path, content=body, headers=headers)
            assert answer.status_code == 400, (path, body, answer.text)
            assert "malformed JSON" in answer.json()["detail"]
        # Well-formed, the item in team a is refused on its own.
        answer = await bob.post(path, content=b'{"%s": [%s]}' % (field.encode(), item),
                                headers=headers)  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert [r["status"] for r in answer.json()["results"]] == [403], path
    await _unchanged(secured, before)


async def test_bodies_of_every_route_are_strict(secured: Secured) -> None:
    alice = secured["alice"]
    headers = {"content-type": "application/json"}
    body = orjson.dumps(application("x", "a"))
    for bad in (body[:-1] + b', "spec": {}}', body.replace(b'"x"', b"NaN", 1)):
        answer = await alice.post("/kubernetes/namespaces/a/applications", content=bad,
                                  headers=headers)  # fmt: skip
        assert answer.status_code == 400, answer.text
    missing = await alice.get("/kubernetes/namespaces/a/applications/x")
    assert missing.status_code == 404


async def test_the_audit_log_names_each_item_of_a_batch(secured: Secured, tmp_path: Path) -> None:
    await _alices_app(secured)
    items = [
        {"namespace": "a", "name": "alice-app", "finalizers": []},
        {"namespace": "b", "name": "nothing-here", "finalizers": []},
    ]
    answer = await secured["bob"].post("/scheduling/applicationfinalizers", json={"items": items})
    assert answer.status_code == 200
    lines = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    batch = [e for e in lines if e["uri"] == "/scheduling/applicationfinalizers"]
    assert batch[-1]["user"] == "bob"
    assert batch[-1]["items"] == ["a/alice-app", "b/nothing-here"]


async def test_a_batch_create_is_authorised_item_by_item(secured: Secured, tmp_path: Path) -> None:
    """Bob may create in b only: his items in a, or naming no namespace, get their own
    403 and are not stored; his item in b is created, and the audit log names all three."""
    items = [application("x", "a"), application("y", "b"), application("z", "a")]
    del items[2]["metadata"]["namespace"]
    answer = await secured["bob"].post("/kubernetes/applications", json={"items": items})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [(r["namespace"], r["name"], r["status"]) for r in results] == [
        ("a", "x", 403),
        ("b", "y", 200),
        (None, "z", 403),
    ]
    assert "may not create kubernetes/applications in 'a'" in results[0]["detail"]
    admin = secured["admin"]
    listed = (await admin.get("/kubernetes/applications")).json()["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed] == [("b", "y")]
    # All refused: nothing reaches the route.
    answer = await secured["bob"].post("/kubernetes/applications", json={"items": items[:1]})
    assert [r["status"] for r in answer.json()["results"]] == [403]
    lines = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    batch = [e for e in lines if e["uri"] == "/kubernetes/applications" and e["verb"] == "create"]
    assert batch[0]["user"] == "bob" and batch[0]["items"] == ["a/x", "b/y", "None/z"]


async def test_a_query_parameter_is_read_once(secured: Secured) -> None:
    alice = secured["alice"]
    path = "/kubernetes/namespaces/a/applications"
    for query in ("watch=false&watch=true", "limit=1&limit=5", "watch&watch"):
        answer = await alice.get(f"{path}?{query}")
        assert answer.status_code == 400, (query, answer.text)
        assert "given more than once" in answer.json()["detail"]


async def test_a_watch_beats_no_faster_than_the_floor(secured: Secured) -> None:
    alice = secured["alice"]
    path = "/kubernetes/namespaces/a/applications"
    for heartbeat in ("0.000001", "0", "-1", "nan", "x"):
        answer = await alice.get(path, params={"watch": "true", "heartbeat": heartbeat})
        assert answer.status_code == 422, answer.text
        assert "heartbeat" in answer.json()["detail"]
    watch = await start_watch(alice, path, heartbeat=1)
    assert watch.status == 200
    await watch.stop()


async def test_every_list_is_paged(secured: Secured) -> None:
    """The page cap holds with no limit and with a limit spelled to slip past a check."""
    admin = secured["admin"]
    for i in range(5):
        await admin.post("/kubernetes/namespaces/a/applications", json=application(f"a{i}", "a"))
    # the fixture's server caps pages at max_page; a small cap is set per server, so here the
    # default (10,000) is checked through the answer's shape and the query rewrite
    answer = await admin.get("/kubernetes/applications")
    assert answer.status_code == 200
    assert len(answer.json()["items"]) == 5
    for limit in ("%2B20000", "+5", "-1", "abc", "0", "1e3"):
        answer = await admin.get(f"/kubernetes/applications?limit={limit}")
        assert answer.status_code == 422, (limit, answer.text)
        assert "limit" in answer.json()["detail"]
    answer = await admin.get("/kubernetes/applications?limit=2")
    assert len(answer.json()["items"]) == 2 and answer.json()["metadata"]["continue"]


async def test_a_list_without_limit_gets_one_page_and_clients_follow_it(tmp_path: Path) -> None:
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path, limits=Limits(max_page=3))
    )
    try:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"authorization": "Bearer admin-token"}
        ) as admin:
            for i in range(7):
                body = application(f"a{i}", "a")
                assert (await admin.post("/kubernetes/namespaces/a/applications",
                                         json=body)).status_code == 200  # fmt: skip
            for query in ("", "?limit=20000"):
                page = (await admin.get(f"/kubernetes/applications{query}")).json()
                assert len(page["items"]) == 3 and page["metadata"]["continue"]
        async with ShoalClient(server.url, token="admin-token") as client:
            listed = await client.list(Application)
            assert len(listed.items) == 7
    finally:
        await server.stop()


# The door reads what the route reads ---------------------------------------------------


async def _streams(client: httpx.AsyncClient, url: str, count: int) -> list[int]:
    """Open ``count`` streams of ``url`` at once and hold them: each one's status."""
    statuses: list[int] = []
    stack = contextlib.AsyncExitStack()
    async with stack:
        for _ in range(count):
            response = await stack.enter_async_context(client.stream("GET", url))
            statuses.append(response.status_code)
    return statuses


async def test_an_encoded_query_key_is_the_key_the_route_reads(tmp_path: Path) -> None:
    """``%77atch`` is ``watch`` to the route: to the guard too (watch cap, heartbeat floor)."""
    limits = Limits(watches_per_user=2)
    async with secured_admin(tmp_path, limits=limits, timeout=30) as (_, admin):
        path = "/kubernetes/namespaces/a/applications"
        for query in ("%77atch=1&heartbeat=0.001", "watch=1&%68eartbeat=0.001",
                      "w%61tch&heartbeat=0"):  # fmt: skip
            answer = await admin.get(f"{path}?{query}")
            assert answer.status_code == 422, (query, answer.text)
            assert "heartbeat: must be at least 1 seconds" in answer.json()["detail"]
        answer = await admin.get(f"{path}?watch=1&%77atch=1")
        assert answer.status_code == 400 and "given more than once" in answer.text
        statuses = await _streams(admin, f"{path}?%77atch=1&heartbeat=5", 3)
        assert statuses == [200, 200, 429], statuses


def _nested(depth: int) -> bytes:
    """An application whose manifest nests ``depth`` arrays and objects in all."""
    inner = b"1"
    for _ in range(depth - 5):  # within the body, spec, manifest, the ConfigMap and data
        inner = b"[" + inner + b"]"
    return (
        b'{"api":"kubernetes","kind":"Application","metadata":{"name":"deep"},'
        b'"spec":{"manifest":[{"apiVersion":"v1","kind":"ConfigMap","metadata":'
        b'{"name":"deep"},"data":{"x":' + inner + b"}}]}}"
    )


async def test_a_body_nested_too_deep_is_a_400(secured: Secured) -> None:
    """Deeper than the door allows (and deeper than orjson writes back: 255–1,024 gave 500s)."""
    alice = secured["alice"]
    headers = {"content-type": "application/json"}
    path = "/kubernetes/namespaces/a/applications"
    for depth in (129, 255, 600, 1024, 2000):
        for target in (path, "/kubernetes/applications", "/scheduling/applicationstatuses"):
            answer = await alice.post(target, content=_nested(depth), headers=headers)
            assert answer.status_code == 400, (depth, target, answer.text)
            assert f"nested deeper than {MAX_DEPTH}" in answer.json()["detail"], answer.text
    missing = await alice.get(f"{path}/deep")
    assert missing.status_code == 404
    # at the limit: the door lets it through, and the route answers (a manifest's check)
    answer = await alice.post(path, content=_nested(MAX_DEPTH), headers=headers)
    assert answer.status_code in (200, 422), answer.text


async def test_a_list_for_the_exec_command_is_a_422_naming_it(secured: Secured) -> None:
    body = cluster("c1", "a")
    body["spec"]["kubeconfig"]["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": ["sh", "-c", "id"]}
    }
    answer = await secured["alice"].post("/kubernetes/namespaces/a/clusters", json=body)
    assert answer.status_code == 422, answer.text
    fields = [e["field"] for e in answer.json()["errors"]]
    assert "spec.kubeconfig.users[0].user.exec.command" in fields, fields
    assert "must be a string" in answer.text
    missing = await secured["alice"].get("/kubernetes/namespaces/a/clusters/c1")
    assert missing.status_code == 404


async def test_a_dry_run_answers_as_the_write_would(secured: Secured) -> None:
    """A placeholder sent to a new server: the dry run is refused as the write is."""
    bob, alice, kube = secured["bob"], secured["alice"], secured["system:kube-controller"]
    path = "/kubernetes/namespaces/b/clusters/c1"
    await bob.post("/kubernetes/namespaces/b/clusters", json=cluster("c1", "b", "bobs-token"))
    await grant(secured["admin"], "alice", role("clusters-editor-b", "*", ("clusters",), ("b",),
                                                ("get", "list", "update")))  # fmt: skip

    async def readable() -> bool:
        return (await alice.get(path)).status_code == 200

    await eventually(readable)
    body = (await alice.get(path)).json()
    assert body["spec"]["kubeconfig"]["users"][0]["user"]["token"] == REDACTED
    body["spec"]["kubeconfig"]["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9/x"
    for query in ("?dry_run=true", "?dryRun=All", ""):
        answer = await alice.put(path + query, json=body)
        assert answer.status_code == 403, (query, answer.text)
        assert "spec.kubeconfig.clusters" in answer.json()["detail"]
    stored = (await kube.get(path)).json()["spec"]["kubeconfig"]
    assert stored["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await reader.read()  # until the server closes the connection


async def test_slow_and_crowding_clients_are_cut_off(tmp_path: Path) -> None:
    """Half-sent requests are answered 408 and closed after the request timeout; one
    client's connections beyond the cap are refused, and its others still served."""
    limits = Limits(request_timeout=1.0, connections_per_client=4)
    server = await start_api(
        f"sqlite://{tmp_path / 'shoal.db'}", security=security(tmp_path, limits=limits)
    )
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    try:
        held = [await asyncio.open_connection(host, port) for _ in range(4)]
        for _, writer in held[:2]:  # half the headers; half a body
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        held[2][1].write(
            b"POST /kubernetes/namespaces/a/applications HTTP/1.1\r\nhost: x\r\n"
            b"authorization: Bearer admin-token\r\ncontent-length: 100\r\n\r\n{"
        )
        crowded = await asyncio.open_connection(host, port)
        refused = await asyncio.wait_for(_read_all(crowded[0]), 10)
        assert refused.startswith(b"HTTP/1.1 429"), refused
        assert b"at most 4 connections per client" in refused
        for reader, _ in held[:3]:
            late = await asyncio.wait_for(_read_all(reader), 10)
            assert late.startswith(b"HTTP/1.1 408"), late
        # the cut connections no longer count: a new one is served
        async with httpx.AsyncClient(base_url=server.url) as http:
            assert (await http.get("/healthz")).status_code == 200
        for _, writer in held:
            writer.close()
    finally:
        await server.stop()


async def test_a_request_that_arrives_in_time_is_not_cut(tmp_path: Path) -> None:
    """The timeout is for a request to arrive, not for its answer: a watch outlives it."""
    limits = Limits(request_timeout=0.5)
    async with secured_admin(tmp_path, limits=limits) as (_, admin):
        path = "/kubernetes/namespaces/a/applications"
        watch = await start_watch(admin, path, heartbeat=1)
        assert watch.status == 200
        await wait_for(lambda: watch.heartbeats >= 2, timeout=20, message="2 heartbeats")
        assert not watch.ended.is_set()
        await admin.post(path, json=application("late", "a"))
        await wait_for(lambda: watch.events, timeout=20, message="the watch's event")
        await watch.stop()
