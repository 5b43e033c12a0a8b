"""Run mutmut on the modules of scripts/mutation/modules.toml and print what survived.

Each module gets a work folder, .mutate/MODULE/, holding a setup.cfg for mutmut (the module's
files to mutate, its tests) and links to the repository; mutmut copies the code into
.mutate/MODULE/mutants/, mutates the module's files there and runs, for each mutant, the
tests of the module's list that reached the mutated function, in one child at a time (the
machine is shared). The worktree's own files are never changed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "scripts" / "mutation" / "modules.toml"
WORK = ROOT / ".mutate"
MUTMUT = Path(sys.executable).with_name("mutmut")
ALSO_COPY = ["docs", "bench", "scripts", "README.md"]
DETECTED = {"killed", "timeout", "caught by type check", "segfault"}


@dataclass(frozen=True)
class Equivalent:
    """A mutant judged equivalent, named by its function (mutmut's name without the
    ``__mutmut_N`` number, which shifts when the function changes) and its change."""

    function: str
    change: str  # "old  ->  new", as scripts/mutate prints it after file:line
    reason: str

    def matches(self, mutant: str, change: str) -> bool:
        return (mutant.rsplit("__mutmut_", 1)[0] == self.function
                and change.split(": ", 1)[-1] == self.change)


@dataclass
class Module:
    name: str
    what: str
    mutate: list[str]
    tests: list[str]
    also_copy: list[str] = field(default_factory=list)
    equivalent: list[Equivalent] = field(default_factory=list)


def load_table(path: Path = TABLE) -> dict[str, Module]:
    """The table, one Module per row, in the file's order."""
    data = tomllib.loads(path.read_text())
    return {name: Module(name=name, what=row["what"], mutate=row["mutate"], tests=row["tests"],
                         also_copy=row.get("also_copy", []),
                         equivalent=[Equivalent(**e) for e in row.get("equivalent", [])])
            for name, row in data.items()}


def _lines(values: list[str]) -> str:
    return "".join(f"\n    {v}" for v in values)


def prepare(module: Module) -> Path:
    """A fresh work folder for the module: mutmut's configuration and links to the code."""
    work = WORK / module.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ["shoal", "tests", *ALSO_COPY, *module.also_copy]:
        (work / name).symlink_to(ROOT / name)
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = shoal\n"
        f"only_mutate ={_lines(module.mutate)}\n"
        f"pytest_add_cli_args_test_selection ={_lines(module.tests)}\n"
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n"
        f"also_copy ={_lines([*ALSO_COPY, *module.also_copy])}\n"
        "use_git_change_detection = false\n")
    return work


def _env() -> dict[str, str]:
    """The environment of mutmut's run: nothing that would import the unmutated code first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    return env


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    """Run a mutmut command in ``work``: its output returned, or written to ``log``."""
    with open(log, "w") if log is not None else open(os.devnull, "w") as sink:
        done = subprocess.run([str(MUTMUT), *args], cwd=work, env=_env(), text=True,
                              stdout=sink if log is not None else subprocess.PIPE,
                              stderr=subprocess.STDOUT, check=False)
    output = log.read_text(errors="replace") if log is not None else done.stdout
    if done.returncode != 0:
        tail = "\n".join(output.replace("\r", "\n").splitlines()[-40:])
        raise SystemExit(f"mutmut {' '.join(args)} failed in {work} (exit {done.returncode}):"
                         f"\n{tail}")
    return output


def results(work: Path) -> dict[str, str]:
    """mutant name -> mutmut's status, for every mutant of the last run."""
    out = mutmut(work, "results", "--all", "true")
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\S+): (.+)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def function_line(path: Path, mutant: str) -> int:
    """The first line (decorators included) of the function a mutant changes.

    mutmut names a mutant after its function: ``pkg.mod.x_NAME__mutmut_N`` or, for a
    method, ``pkg.mod.xǁCLASSǁNAME__mutmut_N``; its diff counts lines from there.
    """
    qualified = mutant.rsplit(".", 1)[1].rsplit("__mutmut_", 1)[0]
    parts = qualified[1:].split("ǁ")[1:] if qualified.startswith("xǁ") else [qualified[2:]]
    nodes: list[ast.stmt] = ast.parse(path.read_text()).body
    found: ast.stmt | None = None
    for part in parts:
        found = next((n for n in nodes if isinstance(
            n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part), None)
        if found is None:
            return 1
        nodes = found.body
    assert found is not None
    decorators = getattr(found, "decorator_list", [])
    return min([found.lineno, *(d.lineno for d in decorators)])


#: Prints each named mutant's diff as JSON, run in a work folder: one process for all of
#: them, where ``mutmut show`` would start one per mutant.
DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name, path=find_mutant(name).path)
                  for name in sys.argv[1:]}))
"""


def diffs(work: Path, mutants: list[str]) -> dict[str, str]:
    if not mutants:
        return {}
    done = subprocess.run([sys.executable, "-c", DIFFS, *mutants], cwd=work, env=_env(),
                          text=True, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"reading the mutants' diffs failed in {work}:\n{done.stderr[-3000:]}")
    found: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def change(mutant: str, diff: str) -> str:
    """'file:line: old  ->  new' for one mutant, from mutmut's diff of its function."""
    path, start, offset = "?", 0, 0
    minus: list[str] = []
    plus: list[str] = []
    line = None
    for text in diff.splitlines():
        if text.startswith(("+++ ", "--- ")):
            path = text[4:].strip()
            continue
        hunk = re.match(r"@@ -(\d+)", text)
        if hunk:
            start, offset = int(hunk.group(1)), 0
            continue
        if not start:
            continue
        if text.startswith("-"):
            line = line or start + offset
            minus.append(text[1:].strip())
            offset += 1
        elif text.startswith("+"):
            plus.append(text[1:].strip())
        else:
            offset += 1
    if line is not None and path != "?":
        line += function_line(ROOT / path, mutant) - 1
    return f"{path}:{line or '?'}: {' / '.join(minus)}  ->  {' / '.join(plus)}"


@dataclass
class Score:
    module: str
    mutants: int
    killed: int
    timeouts: int
    equivalent: list[tuple[str, str, str]]  # (name, change, reason)
    survived: list[tuple[str, str, str]]  # (name, status, change)
    stale: list[str]  # equivalents of the table that match no surviving mutant

    @property
    def score(self) -> float:
        judged = self.mutants - len(self.equivalent)
        return 100.0 * (self.killed + self.timeouts) / judged if judged else 100.0


def _place(change: str) -> tuple[str, int]:
    """A survivor's file and line, to list them in the file's order."""
    path, _, rest = change.partition(":")
    line = rest.partition(":")[0]
    return path, int(line) if line.isdigit() else 0


def run(module: Module) -> Score:
    work = prepare(module)
    log = work / "run.log"
    print(f"== {module.name}: {module.what}\n"
          f"   mutmut run: its progress in {log.relative_to(ROOT)}", flush=True)
    mutmut(work, "run", "--max-children", "1", log=log)
    return score(module, work)


def score(module: Module, work: Path) -> Score:
    """The figures of the module's last run in ``work``, with the table's equivalents."""
    status = results(work)
    killed = sum(1 for s in status.values() if s in DETECTED and s != "timeout")
    timeouts = sum(1 for s in status.values() if s == "timeout")
    left = [n for n, s in sorted(status.items()) if s not in DETECTED]
    diff = diffs(work, left)
    changes = {n: change(n, diff[n]) for n in left}
    judged = {n: e for n in left for e in module.equivalent if e.matches(n, changes[n])}
    survived = sorted(((n, status[n], changes[n]) for n in left if n not in judged),
                      key=lambda item: _place(item[2]))
    equivalent = sorted(((n, changes[n], e.reason) for n, e in judged.items()),
                        key=lambda item: _place(item[1]))
    stale = [e.change for e in module.equivalent if e not in judged.values()]
    return Score(module.name, len(status), killed, timeouts, equivalent, survived, stale)


def report(score: Score) -> None:
    print(f"\n{score.module}: {score.mutants} mutants, {score.killed} killed, "
          f"{score.timeouts} timeouts, {len(score.equivalent)} equivalent, "
          f"{len(score.survived)} survived: score {score.score:.1f} %")
    for name, status, what in score.survived:
        print(f"  {status}: {name}\n      {what}")
    for name, what, reason in score.equivalent:
        print(f"  equivalent: {name}\n      {what}\n      why: {reason}")
    for what in score.stale:
        print(f"  warning: the table's equivalent '{what}' matches no surviving mutant "
              "(killed now, or the code changed): remove it from the table")


def main(argv: list[str]) -> int:
    table = load_table()
    if argv == ["--list"]:
        for m in table.values():
            print(f"{m.name}: {m.what}\n  mutate: {' '.join(m.mutate)}\n"
                  f"  tests:  {' '.join(m.tests)}")
        return 0
    again = argv[:1] == ["--report"]  # the last run's figures, with today's equivalents
    argv = argv[1:] if again else argv
    names = list(table) if argv == ["all"] else argv
    unknown = [n for n in names if n not in table]
    if unknown:
        print(f"mutate: no module {', '.join(unknown)} in {TABLE.relative_to(ROOT)}; "
              f"modules: {', '.join(table)}", file=sys.stderr)
        return 2
    scores = []
    for name in names:
        if again:
            print(f"== {name}: the last run, in {(WORK / name).relative_to(ROOT)}")
        figures = score(table[name], WORK / name) if again else run(table[name])
        report(figures)
        scores.append(figures)
    print("\n| module | mutants | killed | timeouts | equivalent | survived | score |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in scores:
        print(f"| {s.module} | {s.mutants} | {s.killed} | {s.timeouts} | {len(s.equivalent)} | "
              f"{len(s.survived)} | {s.score:.1f} % |")
    (WORK / "last.json").write_text(json.dumps([s.__dict__ for s in scores], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
