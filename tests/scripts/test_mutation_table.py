"""scripts/mutate's table names files that exist: a renamed module or test file fails here,
not in the middle of a mutation run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_run", ROOT / "scripts" / "mutation" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_run", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_listed_file_exists() -> None:
    table = _runner().load_table()
    assert {"spread", "framework", "placement-rules", "fleet-commit"} <= set(table)
    missing = [f"{m.name}: {path}" for m in table.values()
               for path in [*m.mutate, *m.tests, *m.also_copy] if not (ROOT / path).exists()]
    assert missing == []


def test_every_module_mutates_python_and_runs_tests() -> None:
    for module in _runner().load_table().values():
        assert module.mutate and all(p.endswith(".py") for p in module.mutate), module.name
        assert module.tests and all(p.startswith("tests/") for p in module.tests), module.name


def test_every_equivalent_mutant_says_why() -> None:
    for module in _runner().load_table().values():
        for equivalent in module.equivalent:
            assert equivalent.function.startswith("shoal."), equivalent
            assert "__mutmut_" not in equivalent.function, "name the function, not the number"
            assert "  ->  " in equivalent.change, equivalent
            assert len(equivalent.reason.split()) >= 4, f"{equivalent}: give the reason"


def test_an_equivalent_is_known_by_its_function_and_change_not_its_number() -> None:
    runner = _runner()
    equivalent = runner.Equivalent("shoal.m.x_f", "a and b  ->  a or b", "reason given here")
    assert equivalent.matches("shoal.m.x_f__mutmut_3", "shoal/m.py:12: a and b  ->  a or b")
    assert equivalent.matches("shoal.m.x_f__mutmut_9", "shoal/m.py:14: a and b  ->  a or b")
    assert not equivalent.matches("shoal.m.x_g__mutmut_3", "shoal/m.py:12: a and b  ->  a or b")
    assert not equivalent.matches("shoal.m.x_f__mutmut_3", "shoal/m.py:12: a and b  ->  b")


def test_a_mutant_is_placed_on_its_file_line() -> None:
    """The survivors' list points at the line changed, counted from the file's start."""
    runner = _runner()
    path = ROOT / "shoal" / "scheduler" / "spread.py"
    lines = path.read_text().splitlines()
    line = runner.function_line(path, "shoal.scheduler.spread.x_short_of__mutmut_1")
    assert lines[line - 1].startswith("def short_of(")
    line = runner.function_line(path, "shoal.scheduler.spread.xǁPickǁexplain__mutmut_1")
    assert lines[line - 1].strip().startswith("def explain(")
