"""The one kubeconfig reader: where the file is, its one document, the context chosen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from shoal.machinery.kubeconfig import (
    KubeconfigError,
    kubeconfig_path,
    one_context,
    read_kubeconfig,
)


def config(*contexts: str, current: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "current-context": current,
        "contexts": [{"name": c, "context": {"cluster": f"{c}-c", "user": f"{c}-u"}}
                     for c in contexts],
        "clusters": [{"name": f"{c}-c", "cluster": {"server": f"https://{c}"}} for c in contexts],
        "users": [{"name": f"{c}-u", "user": {"token": c}} for c in contexts],
    }


@pytest.mark.parametrize(
    ("given", "context", "chosen"),
    [
        (config("a"), None, "a"),  # the only one
        (config("a", "b", current="b"), "a", "a"),  # the one named, whatever is current
        (config("a", "b"), "b", "b"),
    ],
)
def test_one_context_keeps_the_chosen_context_its_cluster_and_user(
    given: dict[str, Any], context: str | None, chosen: str
) -> None:
    reduced = one_context(given, context, "k.yaml")
    assert reduced["current-context"] == chosen
    assert [c["name"] for c in reduced["contexts"]] == [chosen]
    assert reduced["clusters"] == [{"name": f"{chosen}-c", "cluster": {"server": f"https://{chosen}"}}]
    assert reduced["users"] == [{"name": f"{chosen}-u", "user": {"token": chosen}}]
    assert reduced["apiVersion"] == "v1"


@pytest.mark.parametrize(
    ("given", "context", "message"),
    [
        (config("a", "b", current="a"), None,
         "kubeconfig k.yaml has 2 contexts (a, b); Shoal needs exactly one: pick one with "
         "--context NAME"),
        (config(), None, "kubeconfig k.yaml has no contexts; Shoal needs exactly one"),
        (config("a"), "z", "kubeconfig k.yaml has no context 'z'; it has: a"),
        ({**config("a"), "users": []}, None,
         "kubeconfig k.yaml: context 'a' names user 'a-u', which is not in users"),
        ({"contexts": [{"name": "a", "context": "x"}]}, None,
         "kubeconfig k.yaml: context 'a' is malformed"),
    ],
)  # fmt: skip
def test_a_kubeconfig_without_one_usable_context_is_refused_by_name(
    given: dict[str, Any], context: str | None, message: str
) -> None:
    with pytest.raises(KubeconfigError) as refused:
        one_context(given, context, "k.yaml")
    assert str(refused.value) == message


def test_the_file_is_the_one_given_else_kubeconfig_else_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kubeconfig_path() == tmp_path / ".kube" / "config"
    monkeypatch.setenv("KUBECONFIG", f"/first{os.pathsep}/second")
    assert kubeconfig_path() == Path("/first")
    assert kubeconfig_path("/given") == Path("/given")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no YAML document"),
        ("a: 1\n---\nb: 2\n", "must hold one YAML document, found 2"),
        ("- a\n", "document 1 is not a mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_a_file_that_is_not_one_mapping_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeconfigError, match=message):
        read_kubeconfig(str(path))


def test_a_kubeconfig_file_is_read_whole(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config("a")))
    assert read_kubeconfig(str(path)) == config("a")
