"""Functions the tests of ``shoal.machinery.confined`` run in a worker."""

from __future__ import annotations

import os
import socket
import time
from typing import Any


def echo(argument: Any) -> Any:
    return argument


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def spin(argument: Any) -> None:
    while True:
        pass


def allocate(megabytes: int) -> int:
    """Hold ``megabytes`` at once (beyond the worker's cap, a MemoryError)."""
    held = bytearray(megabytes << 20)
    return len(held)


def end(argument: Any) -> None:
    os._exit(7)


def read_file(path: str) -> str:
    with open(path) as file:
        return file.read()


def connect(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return "connected"


def whoami(argument: Any) -> dict[str, Any]:
    return {"uid": os.getuid(), "pid": os.getpid(), "sees_etc": os.path.exists("/etc/passwd")}


def environment(argument: Any) -> list[str]:
    return sorted(os.environ)
