"""A cluster's template given as a URL, on the API ``shoal up`` ships.

- The administrator's ``SHOAL_TOSCA_URLS`` allows URLs by scheme, host, port and path:
  a URL that only starts with the same text (another host under it, a login before
  the real host) is refused at the API (a 422 on ``spec.tosca``) and by the controller.
- A template read from a URL may not use YAML aliases (a few aliases of aliases are
  billions of nodes once walked: the controller's event loop stalled for 26 s) nor
  nest deeper than a template may (a RecursionError stopped the build's pass).

alice is the attacker; the listener stands for a host the administrator did not name.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from shoal.infrastructure.providers import ProviderError, fetch_template
from shoal.machinery import outbound
from shoal.model.tosca import MAX_DEPTH, allowed_url
from tests.security.conftest import Secured
from tests.security.test_outbound import cluster_to_build, refused

LAUGHS = "\n".join(
    [
        "tosca_definitions_version: tosca_simple_yaml_1_0",
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]"
            for before, name in zip("abcdefg", "bcdefgh", strict=True)
        ),
        "topology_template:",
        "  node_templates: {node: {type: tosca.nodes.Compute}}",
        "  outputs: {kubeconfig: {value: *h}}",
        "",
    ]
)
"""9**8 strings once expanded, in 700 bytes."""
PYTHON = "tosca_definitions_version: !!python/object/apply:os.system ['touch /tmp/shoal-owned']\n"
DEEP = "tosca_definitions_version: tosca_simple_yaml_1_0\nx: " + "[" * 5000 + "]" * 5000 + "\n"


@contextlib.asynccontextmanager
async def serving(text: str) -> AsyncIterator[tuple[str, list[str]]]:
    """``text`` at ``/t.yaml`` on loopback; the paths asked for."""
    asked: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}", asked
    finally:
        await runner.cleanup()


async def test_a_url_that_only_looks_like_an_allowed_prefix_is_refused(
    secured: Secured, monkeypatch: pytest.MonkeyPatch, tenants_may_reach_loopback: None
) -> None:
    monkeypatch.setenv(
        "SHOAL_TOSCA_URLS", "http://templates.example.org,https://t.example.org/tpl/"
    )
    alice = secured["alice"]
    async with serving("{}") as (listener, asked):
        for url in (
            f"http://templates.example.org@{listener}/t.yaml",
            f"http://templates.example.org:80@{listener}/t.yaml",
            "http://templates.example.org.attacker.example/t.yaml",
            "http://templates.example.org:8080/t.yaml",
            "https://t.example.org/tpl/../private/t.yaml",
            "https://t.example.org/tpl/%2e%2e/private/t.yaml",
        ):
            body = cluster_to_build("from-url", "a")
            body["spec"]["tosca"] = url
            for query in ("?dry_run=true", ""):
                answer = await alice.post(f"/kubernetes/namespaces/a/clusters{query}", json=body)
                refused(answer, "spec.tosca", "not allowed here", "SHOAL_TOSCA_URLS")
            assert not allowed_url(url), url  # the controller reads it by the same rule
        assert asked == []
    # what the administrator named is allowed, in any spelling of it
    for url in ("http://templates.example.org/t.yaml", "http://TEMPLATES.example.org:80/a/t.yaml",
                "https://t.example.org/tpl/t.yaml"):  # fmt: skip
        assert allowed_url(url), url
    assert (await alice.get("/kubernetes/namespaces/a/clusters/from-url")).status_code == 404


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (LAUGHS, "aliases"),
        (DEEP, f"nested deeper than a template may be ({MAX_DEPTH})"),
        (PYTHON, "python/object"),
    ],
)
async def test_a_fetched_template_s_yaml_cannot_stall_or_crash_the_controller(
    text: str, words: str
) -> None:
    policy = outbound.OutboundPolicy(networks=["127.0.0.0/8"])  # type: ignore[list-item]
    gaps: list[float] = []

    async def ticking() -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.01)
            gaps.append(loop.time() - before)

    ticker = asyncio.create_task(ticking())
    try:
        async with serving(text) as (listener, asked), outbound.session(policy) as session:
            with pytest.raises(ProviderError) as refusal:
                await fetch_template(session, f"http://{listener}/t.yaml")
        assert asked == ["/t.yaml"]
        assert "is not YAML" in str(refusal.value) and words in str(refusal.value)
    finally:
        ticker.cancel()
    assert max(gaps, default=0) < 2.0, max(gaps)  # the loop kept serving (it stalled 26 s)
