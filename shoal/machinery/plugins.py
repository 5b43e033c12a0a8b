"""Plugins by name at declared extension points: the one mechanism of every Shoal scheduler.

As in the Kubernetes scheduling framework: each plugin does one job, is registered by name
at the extension points it serves, and is enabled by name in configuration. The
application scheduler, the fleet pipeline and the cluster agents each declare their points
in one ``Registry``; nothing adds a point or a plugin from outside its ``register``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
P = TypeVar("P")


class Registry(Generic[T]):
    """The plugins of one framework, by extension point and name."""

    def __init__(self, framework: str, points: Iterable[str]) -> None:
        self.framework = framework
        self._by_point: dict[str, dict[str, type[T]]] = {point: {} for point in points}

    @property
    def points(self) -> tuple[str, ...]:
        return tuple(self._by_point)

    def register(self, *points: str) -> Callable[[type[P]], type[P]]:
        """Class decorator: the plugin (its ``name``) serves each of ``points``.

        A name is one plugin: a name another class took, at any point, is refused (as
        kube-scheduler's registry does), since replacing a plugin would silently change
        what a configuration that names it enables, and ``make`` shares one instance per
        name across points."""
        unknown = [p for p in points if p not in self._by_point]
        if unknown or not points:
            raise ValueError(
                f"{self.framework} has no extension point {unknown or points!r}; "
                f"its points: {', '.join(self._by_point)}"
            )

        def add(cls: type[P]) -> type[P]:
            name: str = cls.name  # type: ignore[attr-defined]
            for point, plugins in self._by_point.items():
                taken = plugins.get(name)
                if taken is not None and taken is not cls:
                    raise ValueError(
                        f"{self.framework} already has a plugin named {name!r} "
                        f"({taken.__module__}.{taken.__qualname__}, at {point}); "
                        f"{cls.__module__}.{cls.__qualname__} needs a name of its own"
                    )
            for point in points:
                self._by_point[point][name] = cls  # type: ignore[assignment]
            return cls

        return add

    def names(self, point: str) -> list[str]:
        return sorted(self._by_point[point])

    def get(self, point: str, name: str) -> type[T] | None:
        return self._by_point[point].get(name)

    def make(
        self,
        name: str,
        point: str,
        base: type[P],
        *args: Any,
        built: dict[str, Any] | None = None,
    ) -> P:
        """The enabled plugin ``name`` at ``point``, built with ``args``; with ``built``, one
        instance per name is shared by every point the plugin serves."""
        cls = self._by_point[point].get(name)
        if cls is None:
            known = ", ".join(self.names(point)) or "none"
            raise ValueError(f"unknown {point} plugin {name!r}; known: {known}")
        plugin = built.get(name) if built is not None else None
        plugin = plugin if plugin is not None else cls(*args)
        if not isinstance(plugin, base):
            raise ValueError(f"plugin {name!r} is not a {point} plugin")
        if built is not None:
            built[name] = plugin
        return plugin
