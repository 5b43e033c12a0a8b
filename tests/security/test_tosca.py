"""A tenant's TOSCA template is parsed where it cannot hurt: in a confined worker, once per
request, with ``imports`` and ``repositories`` refused before any parse."""

from __future__ import annotations

import asyncio
import copy
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shoal.model import tosca
from shoal.testing import shipped
from shoal.testing.launch import ApiProcess
from shoal.testing.wait import wait_for
from tests.security.conftest import Secured

CLUSTERS = "/kubernetes/namespaces/a/clusters"
COMPUTE = {"type": "tosca.nodes.Compute"}


def template(nodes: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    return {
        "tosca_definitions_version": "tosca_simple_yaml_1_0",
        **sections,
        "topology_template": {
            "node_templates": nodes or {"node": COMPUTE},
            "outputs": {"kubeconfig": {"value": "from the provider"}},
        },
    }


def cloud_cluster(name: str, tosca_template: dict[str, Any]) -> dict[str, Any]:
    return {
        "api": "kubernetes",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": "a"},
        "spec": {"tosca": tosca_template},
    }


async def _refused(secured: Secured, body: dict[str, Any]) -> list[dict[str, str]]:
    """The errors of a dry run and of the real create, which must be the same 422."""
    alice = secured["alice"]
    found = []
    for params in ({"dry_run": "true"}, {}):
        answer = await alice.post(CLUSTERS, json=body, params=params)
        assert answer.status_code == 422, answer.text
        found.append(answer.json()["errors"])
    assert found[0] == found[1]
    assert (await alice.get(f"{CLUSTERS}/{body['metadata']['name']}")).status_code == 404
    return list(found[0])


async def test_a_type_derived_from_itself_times_out_while_the_api_keeps_serving(
    secured: Secured,
) -> None:
    looping = template({"node": {"type": "my.Loop"}}, node_types={"my.Loop": {
        "derived_from": "my.Loop"}})  # fmt: skip
    answers: list[int] = []

    async def health_while_parsing() -> None:
        while not answers:
            answer = await secured.anonymous.get("/healthz")
            assert answer.status_code == 200
            await asyncio.sleep(0.1)

    async def parse() -> list[dict[str, str]]:
        try:
            return await _refused(secured, cloud_cluster("loop", looping))
        finally:
            answers.append(1)

    errors, _ = await asyncio.gather(parse(), health_while_parsing())
    assert errors == [{"field": "spec.tosca", "reason": errors[0]["reason"]}]
    assert errors[0]["reason"].startswith("takes longer to parse than a template may")
    # The worker that looped was replaced: the next template parses.
    answer = await secured["alice"].post(CLUSTERS, json=cloud_cluster("fine", template()))
    assert answer.status_code == 200, answer.text


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(p) for p in (task / "children").read_text().split())
    return found


async def test_sigterm_stops_an_api_that_is_parsing_a_looping_template(tmp_path: Path) -> None:
    api = ApiProcess(f"sqlite://{tmp_path}/shoal.db")
    try:
        await api.wait_ready()
        looping = template({"node": {"type": "my.Loop"}}, node_types={"my.Loop": {
            "derived_from": "my.Loop"}})  # fmt: skip
        admin = {"authorization": f"Bearer {shipped.token(shipped.ADMIN)}"}
        async with aiohttp.ClientSession(api.url, headers=admin) as http:
            post = asyncio.ensure_future(http.post(
                "/kubernetes/namespaces/default/clusters", params={"dry_run": "true"},
                json={**cloud_cluster("loop", looping), "metadata": {"name": "loop"}},
            ))  # fmt: skip
            # A worker parses it (the API has a child process), and the API still answers.
            await wait_for(lambda: _children(api.proc.pid), timeout=30, message="a worker")
            async with http.get("/healthz") as answer:
                assert answer.status == 200
            assert not post.done()
            api.proc.send_signal(signal.SIGTERM)
            await wait_for(lambda: api.proc.poll() is not None, timeout=tosca.PARSE_SECONDS + 20,
                           message="the API to stop")  # fmt: skip
            assert api.proc.returncode == 0
            post.cancel()
    finally:
        api.stop()


@pytest.mark.parametrize(
    "imports",
    [
        ["/etc/passwd"],
        ["/no/such/file.yaml"],
        ["file:/etc/passwd"],
        ["file:///etc/hostname"],
        [{"x": {"file": "/etc/passwd"}}],
        [{"x": {"file": "/no/such/file.yaml"}}],
        [{"x": "/etc/passwd"}],
    ],
)
async def test_imports_read_no_file_of_the_api_host_and_tell_nothing(
    secured: Secured, imports: list[Any]
) -> None:
    errors = await _refused(secured, cloud_cluster("reader", template(imports=imports)))
    assert errors == [{
        "field": "spec.tosca.imports[0]",
        "reason": "is not an import an administrator allows (SHOAL_TOSCA_IMPORTS): give types "
                  "inline",
    }]  # fmt: skip


async def test_imports_and_repositories_are_refused_wherever_they_hide(secured: Secured) -> None:
    body = template(
        {"node": {**COMPUTE, "imports": ["/etc/passwd"]}},
        node_types={"my.T": {"derived_from": "tosca.nodes.Compute", "imports": ["/etc/x"]}},
    )
    fields = {e["field"] for e in await _refused(secured, cloud_cluster("hidden", body))}
    assert fields == {
        "spec.tosca.node_types.my.T.imports",
        "spec.tosca.topology_template.node_templates.node.imports",
    }


@pytest.fixture
def listener() -> Iterator[tuple[str, list[bytes]]]:
    """A local HTTP listener that records every connection it gets."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                got.append(connection.recv(4096))
                connection.sendall(b"HTTP/1.0 200 OK\r\n\r\nnode_types: {}\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", got
    stop.set()
    thread.join()
    server.close()


async def test_repositories_make_the_api_fetch_nothing(
    secured: Secured, listener: tuple[str, list[bytes]]
) -> None:
    url, got = listener
    body = template(
        repositories={"mine": {"url": url}},
        imports=[{"types": {"file": "types.yaml", "repository": "mine"}}],
    )
    errors = await _refused(secured, cloud_cluster("fetcher", body))
    assert {e["field"] for e in errors} == {"spec.tosca.repositories", "spec.tosca.imports[0]"}
    body = template(repositories={"mine": url})
    errors = await _refused(secured, cloud_cluster("fetcher", body))
    assert errors == [
        {
            "field": "spec.tosca.repositories",
            "reason": "repositories are not read here: give types inline",
        }
    ]
    assert got == []


async def test_an_allowed_import_gives_an_administrators_types(
    secured: Secured, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    types = tmp_path / "types.yaml"
    types.write_text("node_types:\n  site.Compute:\n    derived_from: tosca.nodes.Compute\n")
    name = "https://types.example/compute.yaml"
    monkeypatch.setenv(tosca.IMPORTS_SETTING, f"{name}={types}")
    body = template({"node": {"type": "site.Compute"}}, imports=[{"site": {"file": name}}])
    answer = await secured["alice"].post(CLUSTERS, json=cloud_cluster("allowed", body))
    assert answer.status_code == 200, answer.text
    body = template({"node": {"type": "site.Compute"}}, imports=[str(types)])
    errors = await _refused(secured, cloud_cluster("by-path", body))
    assert errors[0]["field"] == "spec.tosca.imports[0]"


async def test_a_big_template_is_parsed_once_off_the_event_loop(secured: Secured) -> None:
    nodes = {f"node-{i}": COMPUTE for i in range(8000)}
    errors = await _refused(secured, cloud_cluster("big", template(nodes)))
    assert errors == [
        {
            "field": "spec.tosca.topology_template.node_templates",
            "reason": f"has 8000 node templates: at most {tosca.MAX_NODE_TEMPLATES}",
        }
    ]
    # The largest template allowed is parsed once per request, while others are served.
    workers = tosca.workers()
    nodes = {f"node-{i}": COMPUTE for i in range(tosca.MAX_NODE_TEMPLATES)}
    before = workers.calls
    slowest = 0.0
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    async def others() -> None:
        nonlocal slowest
        while not done.is_set():
            started = loop.time()
            assert (
                await secured["bob"].get("/kubernetes/namespaces/b/clusters")
            ).status_code == 200
            slowest = max(slowest, loop.time() - started)
            await asyncio.sleep(0.02)

    async def create() -> tuple[int, float]:
        started = loop.time()
        try:
            body = cloud_cluster("large", copy.deepcopy(template(nodes)))
            status = (await secured["alice"].post(CLUSTERS, json=body)).status_code
            return status, loop.time() - started
        finally:
            done.set()

    (status, took), _ = await asyncio.gather(create(), others())
    assert status == 200
    assert workers.calls == before + 1
    # Parsed on the event loop, some list would wait for the whole parse.
    assert slowest < took / 2, (slowest, took)


async def test_a_value_of_the_wrong_type_names_its_field(secured: Secured) -> None:
    node = {**COMPUTE, "capabilities": {"host": {"properties": {"num_cpus": "four"}}}}
    errors = await _refused(secured, cloud_cluster("typed", template({"node": node})))
    assert errors == [{
        "field": "spec.tosca.topology_template.node_templates.node.capabilities.host"
                 ".properties.num_cpus",
        "reason": "must be an integer, not 'four'",
    }]  # fmt: skip


async def test_a_parser_crash_is_told_as_the_field_it_needs(secured: Secured) -> None:
    """tosca-parser compares default_instances with bounds it assumes are given."""
    node = {**COMPUTE, "capabilities": {"scalable": {"properties": {"default_instances": 2}}}}
    errors = await _refused(secured, cloud_cluster("bounds", template({"node": node})))
    assert errors == [{
        "field": "spec.tosca.topology_template.node_templates.node.capabilities.scalable"
                 ".properties",
        "reason": "default_instances needs min_instances and max_instances beside it (the "
                  "bounds it must lie between)",
    }]  # fmt: skip


async def test_a_template_nested_too_deep_is_refused_before_any_parse(secured: Secured) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(100):  # past the template's 64, within the door's 128
        inner["x"] = {}
        inner = inner["x"]
    node = {**COMPUTE, "metadata": deep}
    errors = await _refused(secured, cloud_cluster("deep", template({"node": node})))
    assert len(errors) == 1 and errors[0]["field"].startswith(
        "spec.tosca.topology_template.node_templates.node.metadata.x.x"
    )
    assert errors[0]["reason"] == f"is nested deeper than a template may be ({tosca.MAX_DEPTH})"


async def test_one_tenant_s_looping_templates_hold_no_other_s_for_long(secured: Secured) -> None:
    """Eight looping templates of alice held bob's valid one for 42 s behind them. Now a
    user's templates are parsed one after the other (one worker at most), and one that no
    worker takes within the parse's time is a 503 naming ``spec.tosca``, never parsed."""
    alice, bob = secured["alice"], secured["bob"]
    bobs = "/kubernetes/namespaces/b/clusters?dry_run=true"
    good = {**cloud_cluster("good", template()), "metadata": {"name": "good"}}
    answer = await bob.post(bobs, json=good)
    assert answer.status_code == 200, answer.text  # the workers are started
    cycle = {"A": {"derived_from": "B"}, "B": {"derived_from": "A"}}
    looping = template({"node": {"type": "A"}}, node_types=cycle)
    before = tosca.workers().calls
    floods = [
        asyncio.create_task(alice.post(CLUSTERS, json=cloud_cluster(f"loop-{i}", looping),
                                       params={"dry_run": "true"}, timeout=300))
        for i in range(8)
    ]  # fmt: skip

    async def alice_s_in_a_worker() -> bool:
        return tosca.workers().calls > before

    await wait_for(alice_s_in_a_worker, timeout=30, message="alice's template in a worker")
    answer = await bob.post(bobs, json=good, timeout=300)
    assert answer.status_code == 200, answer.text  # the other worker is his
    answers = [await flood for flood in floods]
    statuses = [a.status_code for a in answers]
    assert set(statuses) == {422, 503}, statuses
    busy = next(a for a in answers if a.status_code == 503).json()
    assert busy["errors"][0]["field"] == "spec.tosca", busy
    assert "no TOSCA worker was free for it" in busy["errors"][0]["reason"], busy
    assert statuses.count(422) == tosca.workers().calls - before - 1  # bob's was one
