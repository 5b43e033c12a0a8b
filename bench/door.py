"""The door's strict JSON parse of a write's body: µs per body, against orjson alone.

Every write's body is parsed once at the door (``shoal.api.body.loads``), which
refuses a key given twice. Printed per body: orjson alone (what the door must
pay anyway), orjson with the standard library's key-by-key pass (what the door
ran on every body before it proved most of them free of repeats by counting),
and the door now. Medians of ``--repeat`` timings.

    .venv/bin/python bench/door.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import application
from shoal.api import body


def explanation(clusters: int) -> dict[str, Any]:
    """A scheduling explanation of the shape the scheduler sends in its bindings."""
    names = [f"cluster-{i}" for i in range(clusters)]
    return {
        "summary": f"2/{clusters} clusters available: {clusters - 2} label group is g0",
        "chosen": names[0],
        "score": 0.9,
        "rejected": [{"reason": "label group is g0", "count": clusters - 2, "clusters": names[2:]}],
        "ranking": [
            {"cluster": names[0], "score": 0.9, "metrics": [
                {"name": "m", "value": 0.9, "normalised": 0.9, "weight": 1.0}]},
            {"cluster": names[1], "score": 0.1},
        ],
        "clusters": {n: f"{i}|dad4f9|ONLINE|ab5112|0a0cbf|00" for i, n in enumerate(names)},
        "clusters_total": clusters,
        "time": "2026-11-27T04:27:25.390298+00:00",
        "spec_modified": "2026-11-27T04:27:25.382524+00:00",
        "forced": False,
    }  # fmt: skip


def bindings(n: int, clusters: int) -> dict[str, Any]:
    cluster = {"api": "kubernetes", "kind": "Cluster", "namespace": "default", "name": "c0"}
    items = [
        {"namespace": "default", "name": f"app-{i}", "cluster": cluster,
         "explanation": explanation(clusters), "resource_version": i + 1}
        for i in range(n)
    ]  # fmt: skip
    return {"bindings": items}


def key_by_key(raw: bytes) -> Any:
    value = orjson.loads(raw)
    body._DECODER.decode(raw.decode())
    return value


def micros(parse: Callable[[bytes], Any], raw: bytes, repeat: int) -> float:
    number = max(1, 200_000 // max(len(raw), 1))
    runs = timeit.repeat(lambda: parse(raw), number=number, repeat=repeat)
    return statistics.median(runs) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    batch = bindings(100, 20)
    bodies = {
        "an application (orjson)": orjson.dumps(application("app-000001")),
        "100 bindings, 20-cluster explanations (orjson)": orjson.dumps(batch),
        "the same (json.dumps: a blank after each colon)": json.dumps(batch).encode(),
    }
    print("| body | bytes | orjson alone | key by key | the door |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, raw in bodies.items():
        alone, old, door = (micros(f, raw, args.repeat)
                            for f in (orjson.loads, key_by_key, body.loads))  # fmt: skip
        print(f"| {name} | {len(raw):,} | {alone:,.1f} µs | {old:,.1f} µs | {door:,.1f} µs |")


if __name__ == "__main__":
    main()
