"""A plugin registry refuses a name already taken at a point, as kube-scheduler's does: a
second plugin of the same name would silently replace what a configuration enables."""

from __future__ import annotations

import pytest

from shoal.machinery.plugins import Registry


class Base:
    name = ""


def test_a_taken_name_is_refused_and_the_first_plugin_kept() -> None:
    registry: Registry[Base] = Registry("a test framework", ("filters", "scores"))

    @registry.register("filters", "scores")
    class First(Base):
        name = "zone"

    class Second(Base):
        name = "zone"

    with pytest.raises(
        ValueError, match=r"already has a plugin named 'zone' \(.*First, at filters\)"
    ):
        registry.register("scores")(Second)
    assert registry.get("filters", "zone") is First
    assert registry.get("scores", "zone") is First
    assert registry.make("zone", "scores", Base).__class__ is First


def test_a_name_is_one_plugin_across_points() -> None:
    """``make`` shares one instance per name across points: a second class of that name at
    another point is refused too; the same class registered again changes nothing."""
    registry: Registry[Base] = Registry("a test framework", ("filters", "scores"))

    @registry.register("filters")
    class Zone(Base):
        name = "zone"

    class ZoneScore(Base):
        name = "zone"

    with pytest.raises(
        ValueError, match=r"already has a plugin named 'zone' \(.*Zone, at filters\)"
    ):
        registry.register("scores")(ZoneScore)
    registry.register("scores")(Zone)  # the same plugin serving one more point
    assert registry.get("scores", "zone") is Zone
    registry.register("filters")(Zone)  # again: nothing changes
    assert registry.names("filters") == ["zone"]


def test_the_built_in_plugins_all_have_names_of_their_own() -> None:
    """Every built-in plugin module imports without a refusal."""
    from shoal.agent import plugins as _agent  # noqa: F401
    from shoal.agent.framework import PLUGINS as AGENT
    from shoal.scheduler import plugins as _scheduler  # noqa: F401
    from shoal.scheduler.framework import PLUGINS as SCHEDULER

    assert "resources-fit" in AGENT.names("filters")
    assert "label-constraints" in SCHEDULER.names("filters")
