"""The one kubeconfig reader: where the file is, its one document, the context chosen,
and what a context says beyond how to connect, read as kubectl reads them.

Below every feature, so that the agent, the CLI's ``--kubeconfig`` and import of
Krake's applications, and the kube controller read a kubeconfig alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from shoal.machinery.names import is_kube_namespace

DEFAULT_NAMESPACE = "default"


class KubeconfigError(ValueError):
    """A kubeconfig Shoal cannot use; the message names the file and what is wrong."""


def kubeconfig_path(path: str | None = None) -> Path:
    """``path``, else $KUBECONFIG (its first file), else ~/.kube/config, as kubectl."""
    chosen = path or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
    return Path(chosen) if chosen else Path.home() / ".kube" / "config"


def read_kubeconfig(path: str | None = None) -> dict[str, Any]:
    """The kubeconfig at ``kubeconfig_path(path)``; OSError when it cannot be read."""
    import yaml

    where = kubeconfig_path(path)
    try:
        docs = [d for d in yaml.safe_load_all(where.read_text()) if d is not None]
    except yaml.YAMLError as error:
        raise KubeconfigError(f"{where}: not valid YAML: {error}") from None
    return one_document(docs, str(where))


def one_document(docs: list[Any], where: str) -> dict[str, Any]:
    """The one YAML mapping a kubeconfig file holds (``docs``: its non-empty documents)."""
    if not docs:
        raise KubeconfigError(f"{where} holds no YAML document")
    if len(docs) != 1:
        raise KubeconfigError(f"kubeconfig {where} must hold one YAML document, found {len(docs)}")
    if not isinstance(docs[0], dict):
        raise KubeconfigError(f"{where}: document 1 is not a mapping")
    return docs[0]


def one_context(config: dict[str, Any], context: str | None, where: str) -> dict[str, Any]:
    """``config`` reduced to exactly one context, its user and its cluster: the one named
    ``context``, else the only one there is (a cluster registered with Shoal is one
    cluster, whatever the file's ``current-context``)."""
    contexts = [c for c in config.get("contexts") or [] if isinstance(c, dict)]
    names = [str(c.get("name")) for c in contexts]
    if context is not None:
        chosen = [c for c in contexts if c.get("name") == context]
        if not chosen:
            raise KubeconfigError(f"kubeconfig {where} has no context {context!r}; "
                                  f"it has: {', '.join(names) or 'none'}")  # fmt: skip
    elif len(contexts) == 1:
        chosen = contexts
    elif not contexts:
        raise KubeconfigError(f"kubeconfig {where} has no contexts; Shoal needs exactly one")
    else:
        raise KubeconfigError(
            f"kubeconfig {where} has {len(contexts)} contexts ({', '.join(names)}); "
            "Shoal needs exactly one: pick one with --context NAME"
        )
    ctx = chosen[0]
    inner = ctx.get("context") or {}
    if not isinstance(inner, dict):
        raise KubeconfigError(f"kubeconfig {where}: context {ctx.get('name')!r} is malformed")

    def pick(section: str, name: Any) -> dict[str, Any]:
        entries = [e for e in config.get(section) or [] if isinstance(e, dict)]
        found = [e for e in entries if e.get("name") == name]
        if not found:
            raise KubeconfigError(
                f"kubeconfig {where}: context {ctx.get('name')!r} names {section[:-1]} "
                f"{name!r}, which is not in {section}"
            )
        return found[0]

    cluster = pick("clusters", inner.get("cluster"))
    user = pick("users", inner.get("user"))
    reduced = {k: v for k, v in config.items() if k not in ("contexts", "clusters", "users")}
    reduced.update(
        {
            "contexts": [ctx],
            "clusters": [cluster],
            "users": [user],
            "current-context": ctx.get("name"),
        }
    )
    return reduced


def context_namespace(kubeconfig: dict[str, Any] | None) -> str:
    """The namespace of ``kubeconfig``'s current context (its only one), else ``default``."""
    if not isinstance(kubeconfig, dict):
        return DEFAULT_NAMESPACE
    contexts = [c for c in kubeconfig.get("contexts") or [] if isinstance(c, dict)]
    current = kubeconfig.get("current-context")
    chosen = next((c for c in contexts if c.get("name") == current), None)
    if chosen is None and contexts:
        chosen = contexts[0]
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    if isinstance(namespace, str) and is_kube_namespace(namespace):
        return namespace
    return DEFAULT_NAMESPACE
