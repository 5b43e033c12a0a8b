"""The agents' plugins share the one registry mechanism, and an enabled plugin without a
vectorised form is announced: a warning at start-up and a figure in ``/metrics``, instead of
every pod silently taking the slower plugin loop."""

from __future__ import annotations

import logging

import httpx
import pytest

from shoal.agent.cache import NodeInfo
from shoal.agent.framework import PLUGINS, FilterPlugin, register
from shoal.agent.pod import PodRequest
from shoal.agent.server import AgentServer
from tests.agent.conftest import AgentFactory

FILTERS = ["node-ready", "node-selector", "taint-toleration", "resources-fit", "geo-location"]


@register("filters")
class EvenNodesOnly(FilterPlugin):
    """A filter of a user's own, with no numpy form."""

    name = "test-even-nodes"

    def filter(self, pod: PodRequest, node: NodeInfo) -> str | None:
        return None if node.name.endswith(("0", "2", "4", "6", "8")) else "odd node"


async def metrics(server: AgentServer) -> str:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as agent_http:
        answer = await agent_http.get("/metrics")
    assert answer.status_code == 200
    return answer.text


async def test_builtin_plugins_keep_the_vectorised_path(start: AgentFactory) -> None:
    server = await start()
    page = await metrics(server)
    assert "shoal_agent_vectorised 1.0" in page
    assert 'shoal_agent_plugin_vectorised{phase="filters",plugin="resources-fit"} 1.0' in page


async def test_a_plugin_without_a_vectorised_form_is_announced(
    start: AgentFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="shoal.agent.agent"):
        server = await start(plugins={"filters": [*FILTERS, EvenNodesOnly.name]})
    warned = [r.getMessage() for r in caplog.records if "vectorised" in r.getMessage()]
    assert warned and "test-even-nodes (filters)" in warned[0]
    page = await metrics(server)
    assert "shoal_agent_vectorised 0.0" in page
    assert 'shoal_agent_plugin_vectorised{phase="filters",plugin="test-even-nodes"} 0.0' in page
    assert 'shoal_agent_plugin_vectorised{phase="filters",plugin="node-ready"} 1.0' in page


def test_extension_points_are_declared() -> None:
    assert PLUGINS.points == ("sampling", "filters", "scores")
    assert "test-even-nodes" in PLUGINS.names("filters")
    with pytest.raises(ValueError, match="has no extension point"):
        register("pod-scores")
