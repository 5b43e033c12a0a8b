"""The whole-system chaos soak (``bench/soak.py``) for one minute: with a fixed seed on SQLite,
and with a seed that changes every day (printed, so that a failure is reproduced with it) on
SQLite or, for an odd seed, on a three-member etcd with two API servers. One of its three
clusters joins in pull mode, its agent killed and stopped among the faults."""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
from pathlib import Path

import pytest

from tests.fixtures.etcd import etcd_available

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def _rotating_seed() -> int:
    return int(os.environ.get("SHOAL_SOAK_SEED") or datetime.date.today().toordinal())


def _store(seed: int) -> str:
    return os.environ.get("SHOAL_SOAK_STORE") or ("etcd" if seed % 2 else "sqlite")


@pytest.mark.parametrize(
    ("seed", "store"),
    [(1, "sqlite"), (_rotating_seed(), _store(_rotating_seed()))],
    ids=["fixed", "rotating"],
)
async def test_one_minute_of_chaos_settles(seed: int, store: str) -> None:
    if store == "etcd" and not etcd_available():
        pytest.skip("no etcd binary")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bench" / "soak.py"), "--minutes", "1", "--seed", str(seed),
        "--store", store, "--settle", "180", cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode()
    print(text)
    again = f"SHOAL_SOAK_SEED={seed} SHOAL_SOAK_STORE={store}"
    assert process.returncode == 0, f"soak with seed {seed} on {store} ({again}):\n{text}"
    assert "every invariant holds" in text
    assert "3 clusters (1 in pull mode)" in text
