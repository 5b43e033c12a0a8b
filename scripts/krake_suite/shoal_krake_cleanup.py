# ruff: noqa: UP006, UP035, UP045  (runs under Krake's Python 3.8: typing's generics)
"""A pytest plugin for Krake's functional suite run against Shoal (``scripts/krake-suite``).

It does two things, and changes no test:

- after each test it deletes what the test left behind in the API (objects that were not
  there before it), applications first, so that one failing test does not make the next
  ones fail with 409 on names already taken;
- it skips, with one line each, the tests that need what this machine cannot give:
  OpenStack, a Docker daemon, real containers, an address outside this machine.

It runs in Krake's own virtualenv (Python 3.8) and talks to the API the way ``rok`` does,
with rok's configuration and session; it imports nothing from Shoal.
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, Set, Tuple

import pytest

# What cannot run here, and why: module (or module::test) -> one line.
SKIPS: Dict[str, str] = {
    "test_scripts.py": "needs a Docker daemon (runs Krake's scripts inside Krake's API container)",
    "test_kubernetes_cluster.py::test_cluster_crud": (
        "needs OpenStack and an Infrastructure Manager (creates a real cluster)"
    ),
    "test_example_applications.py::test_mnist_application": (
        "needs real containers (trains the MNIST example inside pods)"
    ),
    "test_hooks.py::test_complete_hook": (
        "needs real containers (the hook script runs inside a pod and calls the API)"
    ),
    "test_hooks.py::test_shutdown_hook": (
        "needs real containers (the hook script runs inside a pod and calls the API)"
    ),
}

# The kinds a test may leave behind, in the order they are deleted: what uses another
# kind goes before it (applications run on clusters, metrics name providers...).
# (api, plural, namespaced)
KINDS: List[Tuple[str, str, bool]] = [
    ("kubernetes", "applications", True),
    ("kubernetes", "clusters", True),
    ("infrastructure", "clouds", True),
    ("infrastructure", "globalclouds", False),
    ("infrastructure", "infrastructureproviders", True),
    ("infrastructure", "globalinfrastructureproviders", False),
    ("core", "metrics", True),
    ("core", "globalmetrics", False),
    ("core", "metricsproviders", True),
    ("core", "globalmetricsproviders", False),
    ("core", "rolebindings", False),
    ("core", "roles", False),
]

Ref = Tuple[str, str, Optional[str], str]  # api, plural, namespace, name


def skip_reason(nodeid: str) -> Optional[str]:
    """The reason ``nodeid`` (``.../test_x.py::test_y[param]``) cannot run here, if any."""
    path, _, rest = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    test = rest.split("[", 1)[0]
    return SKIPS.get(f"{module}::{test}") or SKIPS.get(module)


def list_path(api: str, plural: str) -> str:
    """The route that lists every object of a kind, across namespaces (Krake's list_all)."""
    return f"/{api}/{plural}"


def item_path(ref: Ref) -> str:
    api, plural, namespace, name = ref
    if namespace is None:
        return f"/{api}/{plural}/{name}"
    return f"/{api}/namespaces/{namespace}/{plural}/{name}"


def refs_of(api: str, plural: str, namespaced: bool, listing: dict) -> Set[Ref]:
    """The objects of a list answer (``{"items": [...]}``)."""
    found: Set[Ref] = set()
    for item in listing.get("items") or []:
        metadata = item.get("metadata") or {}
        namespace = metadata.get("namespace") if namespaced else None
        found.add((api, plural, namespace, metadata["name"]))
    return found


def leftovers(before: Iterable[Ref], after: Iterable[Ref]) -> List[Ref]:
    """What is there after a test and was not before it, in the order to delete it."""
    known = set(before)
    order = {(api, plural): i for i, (api, plural, _) in enumerate(KINDS)}
    new = [ref for ref in set(after) if ref not in known]
    return sorted(new, key=lambda r: (order[(r[0], r[1])], r[2] or "", r[3]))


class Api:
    """The API as rok reaches it: rok's configuration, rok's session (client certificate)."""

    def __init__(self) -> None:
        from rok.fixtures import config, session

        self._sessions = session(config())
        self.session = next(self._sessions)

    def call(self, method: str, path: str):
        """The answer, whatever its status (rok's session raises on 4xx and 5xx)."""
        from requests import HTTPError

        try:
            return self.session.request(method, path)
        except HTTPError as error:
            return error.response

    def snapshot(self) -> Set[Ref]:
        found: Set[Ref] = set()
        for api, plural, namespaced in KINDS:
            resp = self.call("GET", list_path(api, plural))
            if resp.status_code == 200:
                found |= refs_of(api, plural, namespaced, resp.json())
        return found

    def delete(self, refs: List[Ref], timeout: float = 180.0) -> List[str]:
        """Delete ``refs`` in order, each kind gone before the next; what stayed, if any."""
        stuck: List[str] = []
        for api, plural, _ in KINDS:
            batch = [r for r in refs if (r[0], r[1]) == (api, plural)]
            for ref in batch:
                self.call("DELETE", item_path(ref))
            deadline = time.monotonic() + timeout
            waiting = list(batch)
            while waiting and time.monotonic() < deadline:
                waiting = [r for r in waiting if self.call("GET", item_path(r)).status_code != 404]
                if waiting:
                    time.sleep(1)
            stuck += [item_path(r) for r in waiting]
        return stuck


_api: Optional[Api] = None
_before: Dict[str, Set[Ref]] = {}


def _the_api() -> Api:
    global _api
    if _api is None:
        _api = Api()
    return _api


class _SkippedModule(pytest.Module):
    """A module that is not imported: it needs what this machine cannot give."""

    reason = ""

    def _importtestmodule(self):
        raise pytest.skip.Exception(self.reason, allow_module_level=True)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(path, parent):
    reason = skip_reason(str(path))
    if reason is None or not str(path).endswith(".py"):
        return None
    module = _SkippedModule.from_parent(parent, fspath=path)
    module.reason = reason
    return module


def pytest_collection_modifyitems(items):
    for item in items:
        reason = skip_reason(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _before[item.nodeid] = _the_api().snapshot()
    yield


def pytest_runtest_teardown(item):
    before = _before.pop(item.nodeid, None)
    if before is None:
        return
    api = _the_api()
    left = leftovers(before, api.snapshot())
    if left:
        stuck = api.delete(left)
        names = ", ".join(item_path(r) for r in left)
        print(f"\n[cleanup] {item.nodeid}: deleted {names}")
        if stuck:
            print(f"[cleanup] {item.nodeid}: still there: {', '.join(stuck)}")
