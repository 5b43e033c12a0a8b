"""A kind's plural and scope are written once, in the catalog (for printing without models):
each model reads them from its entry, every kind has one, and a kind without one is refused
when it is defined."""

from __future__ import annotations

from typing import Literal

import pytest

from shoal.model import catalog, registry
from shoal.model.base import Kind
from shoal.model.kubernetes import Application, Cluster
from shoal.model.scheduling import SchedulerConfiguration


def test_each_model_reads_its_plural_and_scope_from_its_catalog_entry() -> None:
    assert {(k.api_name(), k.kind_name()) for k in registry.KINDS} == set(catalog.BY_KIND)
    for kind in registry.KINDS:
        entry = catalog.entry_of(kind.api_name(), kind.kind_name())
        assert (kind.plural, kind.namespaced) == (entry.plural, entry.namespaced)
    assert (Application.plural, Application.namespaced) == ("applications", True)
    assert (SchedulerConfiguration.plural, SchedulerConfiguration.namespaced) == (
        "schedulerconfigurations",
        False,
    )
    assert Cluster.key("c1", "ns") == "/kubernetes/clusters/ns/c1"


def test_a_kind_missing_from_the_catalog_is_refused() -> None:
    with pytest.raises(TypeError, match=r"kubernetes/Gadget has no entry in shoal\.model\.catalog"):

        class Gadget(Kind):
            api: Literal["kubernetes"] = "kubernetes"
            kind: Literal["Gadget"] = "Gadget"
