"""What a kubeconfig says beyond how to connect: read as kubectl reads it.

Below every feature, so that the kube controller and the CLI's import of
Krake's applications read a context's namespace alike.
"""

from __future__ import annotations

from typing import Any

from shoal.machinery.names import is_kube_namespace

DEFAULT_NAMESPACE = "default"


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
