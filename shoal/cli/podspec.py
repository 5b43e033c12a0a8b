"""``shoal fleet pod create``: the flags that build a pod spec, or a pod pasted from Kubernetes.

``-f pod.yaml`` takes a Kubernetes Pod (its ``spec`` and labels) or a bare pod
spec; ``--image/--cpu/--memory`` make the one container of a quick pod; the
placement flags add Shoal's hints. The model validates the result.
"""

from __future__ import annotations

from typing import Any

from shoal.cli.errors import CliError

_QUICK = "spec.quick."
_LABELS_HELP = "Cluster label constraint, e.g. 'location is DE' (repeatable)."
POD_FLAGS: tuple[tuple[str, str, str, type, dict[str, Any]], ...] = (
    ("-f --file", _QUICK + "file", "Kubernetes Pod or pod spec (YAML).", str, {"read": "yaml"}),
    ("--image", _QUICK + "image", "Image of the pod's one container.", str, {}),
    ("--cpu", _QUICK + "cpu", "CPU request, e.g. 500m.", str, {}),
    ("--memory", _QUICK + "memory", "Memory request, e.g. 128Mi.", str, {}),
    ("--near", _QUICK + "near", "Geo target LAT,LON: only nodes near it.", str, {}),
    ("--max-distance-km", _QUICK + "max_distance_km", "Farthest node from --near (default 10).",
     float, {}),
    ("--priority", "spec.priority", "Higher is scheduled first.", int, {}),
    ("-L --cluster-label-constraint", "spec.placement.cluster_labels", _LABELS_HELP, str,
     {"many": True}),
)
"""Rows of ``shoal.cli.entries.flag`` for ``shoal fleet pod create`` (the table stays in kinds)."""


def _from_file(doc: Any, data: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise CliError("--file: expected a Kubernetes Pod or a pod spec (a mapping)")
    if "spec" not in doc:
        return dict(doc)
    labels = (doc.get("metadata") or {}).get("labels") or {}
    meta = data.setdefault("metadata", {})
    meta["labels"] = {**labels, **(meta.get("labels") or {})}
    return dict(doc["spec"] or {})


def _geo(text: str, distance: float | None) -> dict[str, Any]:
    try:
        lat, lon = (float(part) for part in text.replace("_", ",").split(","))
    except ValueError:
        raise CliError(f"--near: expected LAT,LON (48.21,16.37), got {text!r}") from None
    geo: dict[str, Any] = {"latitude": lat, "longitude": lon}
    if distance is not None:
        geo["max_distance_km"] = distance
    return geo


def pod_spec(entry: Any, data: dict[str, Any]) -> None:
    """Turn the staged flags (``spec.quick``) into the pod spec."""
    spec = data.setdefault("spec", {})
    quick = spec.pop("quick", None) or {}
    if "file" in quick:
        spec = data["spec"] = {**_from_file(quick.pop("file"), data), **spec}
    requests = {k: quick.pop(k) for k in ("cpu", "memory") if k in quick}
    image = quick.pop("image", None)
    if image is not None or requests:
        if spec.get("containers"):
            raise CliError("--image/--cpu/--memory make a container; the file has its own")
        if image is None:
            raise CliError("--image is needed to make a container (or give -f FILE)")
        container = {"name": "main", "image": image, "resources": {"requests": requests}}
        spec["containers"] = [container]
    if not spec.get("containers"):
        raise CliError("a pod needs a container: give --image IMAGE or -f FILE")
    near = quick.pop("near", None)
    distance = quick.pop("max_distance_km", None)
    if near is not None:
        spec.setdefault("placement", {})["geo"] = _geo(near, distance)
    elif distance is not None:
        raise CliError("--max-distance-km needs --near LAT,LON")
