"""A kind's plural and scope are stated in the catalog (for printing without models) and in
its model: they must agree, or the registry refuses to load."""

from __future__ import annotations

import dataclasses

import pytest

from shoal.model import catalog, registry
from shoal.model.kubernetes import Application


def test_every_catalog_entry_agrees_with_its_model() -> None:
    for kind in registry.KINDS:
        registry.check_agrees(kind, catalog.entry_of(kind.api_name(), kind.kind_name()))


@pytest.mark.parametrize(("field", "value"), [("plural", "apps"), ("namespaced", False)])
def test_a_disagreement_is_an_error(field: str, value: object) -> None:
    entry = dataclasses.replace(catalog.entry_of("kubernetes", "Application"), **{field: value})
    with pytest.raises(TypeError, match=f"kubernetes/Application: {field}: catalog"):
        registry.check_agrees(Application, entry)
