"""Each component's metrics live in its own package; the runtime only serves them.

Each module is imported alone in a fresh interpreter, so what it registers is what
it defines (names unchanged: dashboards and alerts read them; a counter's family
drops its ``_total``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LIST = (
    "import importlib, json, sys; from prometheus_client import REGISTRY; "
    "names = lambda: {m.name for m in REGISTRY.collect()}; "
    "before = names(); importlib.import_module(sys.argv[1]); "
    "print(json.dumps(sorted(names() - before)))"
)


def _registered(module: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", LIST, module], capture_output=True,
                          text=True, check=True, timeout=120)  # fmt: skip
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("module", "owns"),
    [
        ("shoal.controllers.prometheus", set()),
        ("shoal.kube.stats", {"shoal_kube_apply_duration_seconds",
                              "shoal_kube_apply_errors_total"}),
        (
            "shoal.scheduler.stats",
            {
                "shoal_scheduler_attempts_total",
                "shoal_scheduler_attempt_duration_seconds",
                "shoal_scheduler_e2e_scheduling_duration_seconds",
                "shoal_scheduler_migrations_total",
                "shoal_scheduler_queue_size",
                "shoal_applications",
            },
        ),
    ],
)
def test_a_component_registers_its_own_metrics_under_their_names(
    module: str, owns: set[str]
) -> None:
    assert _registered(module) == {n.removesuffix("_total") for n in owns}
