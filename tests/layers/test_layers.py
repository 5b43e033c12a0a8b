"""The layers of ``shoal/``: each package imports only the packages below it, no module
takes part in an import cycle (imports inside functions count), and each module imports
alone.

The table is the one ``docs/development.md`` draws; a new package gets a row here.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "shoal"

BASE = {"machinery", "model", "store", "client", "events"}
MAY_IMPORT: dict[str, set[str]] = {
    # the common layer: quantities, selectors, patches, names, TLS, servers, problems
    "machinery": set(),
    "model": {"machinery"},
    "store": {"machinery", "model"},
    "client": {"machinery", "model"},
    "events": {"machinery", "model", "client"},
    # the controller runtime: work queue, leases, the Controller loop, its metrics
    "controllers": {"machinery", "model", "client", "events"},
    # a copy of an application on one member cluster: applied, pruned, observed, reported;
    # the hub's kube controller and a member cluster's agent run the same code
    "copies": BASE,
    # features, each on the layers above; none imports another
    "scheduler": BASE | {"controllers"},
    "kube": BASE | {"controllers", "copies"},
    "observer": BASE | {"controllers"},
    "gc": BASE | {"controllers"},
    "reschedule": BASE | {"controllers"},
    "infrastructure": BASE | {"controllers"},
    "agent": BASE | {"copies"},
    "sim": {"machinery"},
    # the dry run runs the scheduler's own decision code (one decision, two callers); ui:
    # the dashboard's static files
    "api": BASE | {"store", "scheduler", "ui"},
    "ui": set(),
    # the composition root: every component described once, and how each process starts
    "system": BASE
    | {"controllers", "copies", "scheduler", "kube", "observer", "gc", "reschedule",
       "infrastructure", "agent", "sim", "api"},
    # the kubectl-like client: it talks to the API (client, model), prints events, and
    # hands every process and every set-up that reaches into a feature or the store over to
    # the composition root, ``system``; it imports no feature and opens no store
    "cli": {"machinery", "model", "client", "events", "system"},
    # the launcher of tests and benchmarks starts processes as ``system`` does, and secures
    # the suite's API with ``shoal up``'s own set-up (``api.auth.bootstrap``: testing/shipped.py)
    "testing": BASE | {"agent", "copies", "sim", "system", "api"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: Path, typing: bool = False) -> set[str]:
    """The shoal modules ``path`` imports when it runs; with ``typing``, those it imports
    only for type checkers (``if TYPE_CHECKING:``) too."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shoal"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            named = [s for s in subs if s in MODULES]
            found |= set(named) if len(named) == len(subs) else {node.module, *named}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("shoal")}
    return {_module_of(name) for name in found}


def _module_of(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


GRAPH = {module: _imports(path) - {module} for module, path in MODULES.items()}
TYPED_GRAPH = {module: _imports(path, typing=True) - {module} for module, path in MODULES.items()}
"""The imports for type checkers too: a cycle through ``TYPE_CHECKING`` is still two
modules that cannot be understood, changed or tested one without the other."""

ALLOWED_CYCLES: list[list[str]] = []
"""None: a module that needs only the shape of its caller names it as a ``Protocol``
(``kube/hub.py``, ``scheduler/report.py``) rather than importing it."""


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in MODULES} - {""}
    assert packages <= set(MAY_IMPORT), sorted(packages - set(MAY_IMPORT))


def test_packages_import_only_downward() -> None:
    wrong = []
    for module, imported in GRAPH.items():
        own = _package(module)
        allowed = MAY_IMPORT.get(own, set())
        for target in imported:
            other = _package(target)
            if other in ("", own) or "*" in allowed or other in allowed:
                continue
            wrong.append(f"{module} imports {target} ({own} may import {sorted(allowed)})")
    assert not wrong, "\n".join(sorted(wrong))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in graph:
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycles_through_type_checking() -> None:
    """Any one fails (``ALLOWED_CYCLES`` lists none)."""
    cycles = [c for c in _cycles(TYPED_GRAPH) if c not in ALLOWED_CYCLES]
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


#: Run in a fresh interpreter: compile shoal's sources once (into a cache of the test's
#: own: the suite runs without writing bytecode, and each child would compile every module
#: it imports again), import every package the shoal modules import that is not shoal's
#: own, then import each shoal module in a child forked from that warm parent, two at a
#: time, one module per child.
IMPORT_EACH = """
import compileall, importlib, json, multiprocessing, sys, traceback

def import_alone(name):
    try:
        importlib.import_module(name)
    except BaseException:  # the child reports whatever stopped the import
        return traceback.format_exc(limit=-3)
    return None

if __name__ == "__main__":
    root, others, names = json.loads(sys.stdin.read())
    compileall.compile_dir(root, quiet=1)
    for other in others:
        try:
            importlib.import_module(other)
        except BaseException:  # an optional package: the shoal module's import will say
            pass
    assert not [m for m in sys.modules if m == "shoal" or m.startswith("shoal.")]
    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        errors = pool.map(import_alone, names, chunksize=1)
    print(json.dumps({n: e for n, e in zip(names, errors) if e is not None}))
"""


def _others() -> set[str]:
    """The top-level packages, not shoal, that shoal's modules import when they run."""
    found = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    # grpc (aetcd's transport) is not safe to fork once imported: its children hang
    return found - {"shoal", "__future__", "grpc", "aetcd"}


# Work, not a wait: about 70 CPU-seconds of module bodies (each child imports its module's
# shoal dependencies again, which is the point), so on a loaded 2-core machine more than the
# suite's default two minutes.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_module_imports_alone() -> None:
    """Each in a child forked from a fresh interpreter that has imported no shoal module,
    so that no other module's import prepares the ground for it; the parent has imported
    the other packages shoal uses, so that each child pays only for shoal's own code."""
    names = sorted(MODULES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="shoal-bytecode-") as cache:
        env.update(PYTHONPATH=str(ROOT.parent), PYTHONPYCACHEPREFIX=cache)
        done = subprocess.run(
            [sys.executable, "-c", IMPORT_EACH],
            input=json.dumps([str(ROOT), sorted(_others()), names]),
            capture_output=True,
            text=True,
            cwd=ROOT.parent,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    failed: dict[str, str] = json.loads(done.stdout)
    assert not failed, "\n".join(f"{n}:\n{e}" for n, e in failed.items())


def _drawn() -> tuple[dict[str, int], set[tuple[str, str]]]:
    """The picture of ``docs/development.md``: each folder's row (0 at the bottom), and the
    pairs drawn in parentheses (``(api → scheduler: ...)``: a folder importing one on its
    own row)."""
    text = (ROOT.parent / "docs" / "development.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    rows: list[list[str]] = [[]]
    beside: set[tuple[str, str]] = set()
    for line in block.splitlines():
        if "───" in line:
            rows.append([])
            continue
        names = re.split(r"\s{3,}", line.strip())[0]
        if re.fullmatch(r"([a-z]+/\s*)+", names):
            rows[-1] += [n.rstrip("/") for n in names.split()]
        elif line.strip().startswith("("):
            beside |= set(re.findall(r"(\w+) → (\w+)", line))
    drawn: dict[str, int] = {}
    for row, folders in enumerate(reversed(rows)):
        for folder in folders:
            assert folder not in drawn, f"{folder}/ is drawn twice"
            drawn[folder] = row
    return drawn, beside


def test_the_docs_draw_the_computed_layers() -> None:
    """Every package is drawn once, and everything it imports (the computed graph) or may
    import (the table) sits on a lower row, but for the pairs drawn beside each other."""
    drawn, beside = _drawn()
    assert set(drawn) == set(MAY_IMPORT), (
        f"drawn but not in the table: {sorted(set(drawn) - set(MAY_IMPORT))}; "
        f"in the table but not drawn: {sorted(set(MAY_IMPORT) - set(drawn))}"
    )
    below = {(p, q) for p, allowed in MAY_IMPORT.items() for q in allowed}
    below |= {(_package(m), _package(t)) for m, ts in GRAPH.items() for t in ts}
    wrong = [
        f"{p}/ (row {drawn[p]}) uses {q}/ (row {drawn[q]}), drawn at or above it"
        for p, q in sorted(below)
        if p != q and p and q and drawn[q] >= drawn[p] and (p, q) not in beside
    ]
    assert not wrong, "\n".join(wrong)


def test_the_picture_is_read_as_drawn() -> None:
    drawn, beside = _drawn()
    assert drawn["machinery"] == 0 and drawn["store"] > drawn["model"]
    assert drawn["testing"] > drawn["system"] > drawn["kube"] == drawn["agent"]
    assert beside == {("api", "scheduler")}


def test_imports_inside_functions_count(tmp_path: Path) -> None:
    """A cycle hidden in a function is still a cycle; an import for type checkers is not."""
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from shoal.api.app import create_app\n"
        "def later():\n"
        "    from shoal.model.base import Kind\n"
        "    import shoal.store.base\n"
    )
    assert _imports(source) == {"shoal.model.base", "shoal.store.base"}
