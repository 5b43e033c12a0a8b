"""A template the infrastructure controller reads from a URL passes the API's rules (parsed
in a confined worker) before a provider sees it."""

from __future__ import annotations

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
