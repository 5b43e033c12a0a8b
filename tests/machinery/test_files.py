"""Files other processes read are written whole, or not at all (shoal.machinery.files)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from shoal.machinery.files import write_atomically


def test_a_reader_that_waits_for_the_file_never_reads_it_partly(tmp_path: Path) -> None:
    # What the CLI does after `shoal up` and kubectl after `shoal sim`: wait until the file
    # exists, then read it. Written with path.write_text, it exists empty for a while.
    path = tmp_path / "config.yaml"
    versions = [bytes([65 + i]) * 300_000 for i in range(40)]
    reads: list[int] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            if path.exists():
                reads.append(len(path.read_bytes()))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for data in versions:
            write_atomically(path, data)
            seen = len(reads)  # the reader reads on, during the next write too
            while len(reads) == seen and thread.is_alive():
                threading.Event().wait(0.001)
    finally:
        done.set()
        thread.join()
    assert len(reads) >= len(versions)
    assert set(reads) == {300_000}, f"partial reads: {sorted(set(reads))[:5]}"
    assert path.read_bytes() == versions[-1]


def test_a_write_that_fails_leaves_the_old_content_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secrets.key"
    write_atomically(path, "old key\n", private=True)

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, "new key\n", private=True)
    assert path.read_text() == "old key\n"
    assert [p.name for p in tmp_path.iterdir()] == ["secrets.key"]


def test_private_files_are_mode_0600_from_the_start_and_others_readable(tmp_path: Path) -> None:
    key = tmp_path / "api.key"
    key.write_text("a key once written by hand\n")
    key.chmod(0o644)
    write_atomically(key, b"new key\n", private=True)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_bytes() == b"new key\n"
    kubeconfig = write_atomically(tmp_path / "sim-1.yaml", "clusters: []\n")
    assert stat.S_IMODE(kubeconfig.stat().st_mode) & 0o044 == 0o044 & ~_umask()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
