"""A template the infrastructure controller reads from a URL passes the API's rules (parsed
in a confined worker) before a provider sees it."""

from __future__ import annotations

import copy

import pytest

from shoal.infrastructure.controller import _check_fetched
from shoal.infrastructure.providers import ProviderError
from shoal.model.base import ReasonCode
from tests.infrastructure.conftest import template

URL = "https://templates.example/cluster.yaml"


async def test_a_fetched_template_that_imports_a_file_is_refused() -> None:
    fetched = {**template(), "imports": [{"x": {"file": "/etc/passwd"}}]}
    with pytest.raises(ProviderError) as refused:
        await _check_fetched(URL, fetched)
    assert refused.value.code is ReasonCode.INVALID_TOSCA_MANIFEST
    assert refused.value.message.startswith(f"{URL}.imports[0]: is not an import an administrator")


async def test_a_fetched_template_with_a_wrong_value_names_it() -> None:
    fetched = template()
    host = fetched["topology_template"]["node_templates"]["workers"]["capabilities"]["host"]
    host["properties"]["num_cpus"] = "four"
    with pytest.raises(ProviderError) as refused:
        await _check_fetched(URL, fetched)
    assert "capabilities.host.properties.num_cpus: must be an integer" in refused.value.message


async def test_a_sound_fetched_template_passes() -> None:
    await _check_fetched(URL, template())


def _nodes_with_a_wrong_cpu_count(count: int) -> dict[str, object]:
    """The example template with ``count`` worker nodes w0, w1 … each saying ``num_cpus: four``."""
    fetched = template()
    nodes = fetched["topology_template"]["node_templates"]
    workers = nodes.pop("workers")
    for n in range(count):
        node = copy.deepcopy(workers)
        node["capabilities"]["host"]["properties"]["num_cpus"] = "four"
        nodes[f"w{n}"] = node
    return fetched


async def test_a_fetched_template_with_many_wrong_values_names_the_first_five() -> None:
    with pytest.raises(ProviderError) as refused:
        await _check_fetched(URL, _nodes_with_a_wrong_cpu_count(7))
    where = f"{URL}.topology_template.node_templates"
    assert refused.value.message == "; ".join(
        f"{where}.w{n}.capabilities.host.properties.num_cpus: must be an integer, not 'four'"
        for n in range(5)
    )
    assert refused.value.code is ReasonCode.INVALID_TOSCA_MANIFEST


async def test_the_reason_of_a_fetched_template_is_at_most_1000_characters() -> None:
    long_url = "https://templates.example/" + "a" * 400 + "/cluster.yaml"
    with pytest.raises(ProviderError) as refused:
        await _check_fetched(long_url, _nodes_with_a_wrong_cpu_count(5))
    assert len(refused.value.message) == 1000
    assert refused.value.message.startswith(f"{long_url}.topology_template.node_templates.w0.")
