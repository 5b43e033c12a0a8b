"""Mutated bodies against a real API server, over one keep-alive connection.

    .venv/bin/python bench/fuzz.py [--bodies 10000] [--seed 1]

Each body is a kind's sample (``tests/api/samples.py``; clusters also with a TOSCA
template) with one node, anywhere in it (the manifest's objects and the template
included), or the whole body, replaced by an arbitrary JSON value; it is sent as
a create. The API must answer every one with 2xx or 4xx,
and keep the connection: the client holds one connection, so a second one means
the server dropped the first. Prints the answers by status class, the 5xx with
their bodies, and the connections used; exit status 1 on any 5xx or dropped
connection.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shoal.api.server import start_api
from tests.api.samples import CLOUD_CLUSTER, SAMPLES, paths

FUZZED = [*SAMPLES, CLOUD_CLUSTER]


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 2**63, -(2**70), rng.randrange(-1000, 1000)])
    if pick == 3:
        return rng.choice([0.5, -1e308, 1e-300, 3.0])
    if pick in (4, 5):
        return rng.choice(["", "x", "é", "\u0000", "a" * 300, "Deployment", "v1", "../..",
                           "four", "site.Compute", "tosca.nodes.Root", "file:/etc/passwd"])
    if pick == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["kind", "apiVersion", "metadata", "name", "spec", "x", "", "type",
                        "derived_from", "imports", "properties"]):
            _value(rng, depth + 1) for _ in range(rng.randrange(4))}  # fmt: skip


def _mutated(rng: random.Random, body: Any) -> Any:
    path = rng.choice(paths(body))
    if not path:
        return _value(rng)
    body = copy.deepcopy(body)
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = _value(rng)
    return body


async def run(bodies: int, seed: int) -> int:
    rng = random.Random(seed)
    server = await start_api("sqlite://:memory:")
    statuses: Counter[str] = Counter()
    errors: list[str] = []
    connections: set[Any] = set()
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=30) as http:
            for i in range(bodies):
                sample = rng.choice(FUZZED)
                namespace = "default" if sample.namespaced else None
                body = _mutated(rng, sample.body(f"f{i}", namespace))
                try:
                    answer = await http.post(sample.collection(), json=body)
                except httpx.TransportError as error:
                    errors.append(f"{sample.kind}: {type(error).__name__}")
                    continue
                stream = answer.extensions.get("network_stream")
                if stream is not None:
                    connections.add(stream.get_extra_info("client_addr"))
                statuses[f"{answer.status_code // 100}xx"] += 1
                if answer.status_code >= 500:
                    errors.append(f"{sample.kind} {answer.status_code}: {answer.text[:200]}")
    finally:
        await server.stop()
    took = time.perf_counter() - started
    print(f"\nShoal fuzz — {bodies:,} mutated bodies, seed {seed}, {took:.1f} s")
    print("answers: " + ", ".join(f"{k} {v:,}" for k, v in sorted(statuses.items())))
    print(f"connections used: {len(connections)} (1: none dropped)")
    for line in errors[:20]:
        print(f"  {line}")
    return 0 if not errors and statuses["5xx"] == 0 and len(connections) == 1 else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bodies", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args.bodies, args.seed)))


if __name__ == "__main__":
    main()
