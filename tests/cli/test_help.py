"""Help texts: each command says what it does, and every option's names are whole at 80 columns."""

from __future__ import annotations

import pytest

from tests.cli.conftest import invoke, ok


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


async def test_get_help_describes_get_and_for() -> None:
    text = ok(await invoke("get", "--help")).output
    assert "Show one object, or list the objects of a kind." in text
    head = text.split("Options:")[0]
    assert "Events only" not in head, text  # --for's help is the option's, not the command's
    assert "--for KIND/NAME" in text and "shoal get events --for app/web" in text


@pytest.mark.parametrize(
    ("command", "names"),
    [
        (["kube", "cluster", "create"],
         ["--cloud-label-constraint", "--cloud-constraint", "--cloud-metric-constraint"]),
        (["kube", "cluster", "register"], ["--custom-resource", "--global-metric"]),
        (["kube", "app", "create"],
         ["--cluster-label-constraint", "--cluster-metric-constraint",
          "--cluster-resource-constraint", "--conflict-resolution"]),
    ],
)  # fmt: skip
async def test_long_option_names_are_whole(command: list[str], names: list[str]) -> None:
    text = ok(await invoke(*command, "--help")).output
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    for name in names:
        assert name in text, (name, text)
