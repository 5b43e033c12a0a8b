"""A Copy's name: readable, and one per (application, cluster) pair."""

from __future__ import annotations

from shoal.machinery.names import object_name_problem
from shoal.model.copies import copy_name


def test_a_plain_pair_reads_as_application_and_cluster() -> None:
    assert copy_name("web", "edge-7") == "web:edge-7"


def test_pairs_whose_names_hold_colons_never_meet() -> None:
    names = {copy_name("a:b", "c"), copy_name("a", "b:c"), copy_name("a", "b"),
             copy_name("a:b:c", "d")}  # fmt: skip
    assert len(names) == 4
    assert copy_name("a:b", "c").startswith("a:b:c-")


def test_long_names_stay_a_valid_object_name() -> None:
    name = copy_name("a" * 255, "c" * 255)
    assert len(name) <= 255 and object_name_problem(name) is None
    assert name != copy_name("a" * 255, "c" * 254)
