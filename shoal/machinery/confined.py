"""Confined workers: parse what users send in processes that cannot hurt the one that serves.

A parser of a rich format (TOSCA) can loop for ever, grow without bound, or
read files and URLs that a document names. The API runs such parsers here,
never on its event loop: in a small pool of warm worker processes, each one

- started lazily (the first call pays the start; later ones a message round
  trip over a pipe), with its modules imported and warmed before it is confined;
- confined: no network (a new network namespace), no files (its root is an
  empty, deleted directory), user ``nobody``, no new privileges, no new
  processes, files or descriptors (``RLIMIT_NPROC``, ``RLIMIT_FSIZE``,
  ``RLIMIT_NOFILE``), an address-space cap (``RLIMIT_AS``) and a CPU-time cap
  per call (``RLIMIT_CPU``); an empty environment; killed with its parent;
- killed and replaced after a wall-clock timeout, when it dies (memory, CPU),
  and after ``max_calls`` calls.

A call waits for a free worker at most its timeout (``WorkersBusy`` past that: it
never ran), so no caller queues behind everything others sent first; and the
calls of one caller (``CALLER``) go one after the other, so no one holds every
worker.

The confinement a worker reached is in ``Workers.enforced`` (as root on Linux:
all of it; elsewhere a user namespace gives the namespaces and the empty root
where the system allows one, and the limits always apply).

A call names one of the functions (``module:function``) the pool was made
with; its argument and result are JSON. The worker runs nothing else.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import orjson

CALLER: ContextVar[str | None] = ContextVar("shoal_confined_caller", default=None)
"""Who the calls of this context are made for (the API sets its user): a caller's calls in a
pool go one after the other. None: not counted (Shoal's own components)."""
_HEADER = struct.Struct(">I")
_ROOT = str(Path(__file__).resolve().parents[2])  # the directory that holds the shoal package
_NOBODY = 65534
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


class WorkerError(Exception):
    """A call did not give a result: the worker timed out, died, or the function raised."""


class WorkerTimeout(WorkerError):
    """The call ran past its wall-clock or CPU-time limit; its worker was killed."""


class CallFailed(WorkerError):
    """The function raised (its error's type and text), or no such function is served."""


class WorkerDied(WorkerError):
    """The worker ended during the call (its memory cap, most often); it was replaced."""


class WorkersBusy(WorkerError):
    """No worker took the call within its timeout (others' calls held them all): it never
    ran. Without this, calls queue behind every one sent before them, each up to its
    timeout: eight looping templates of one user held another's for 42 s."""


class Workers:
    """A pool of confined worker processes that run ``functions`` (``module:function``).

    ``warm``: functions called once (with None) in each worker before it is
    confined, to import what the functions import lazily.
    """

    def __init__(
        self,
        functions: Iterable[str],
        *,
        warm: Iterable[str] = (),
        size: int = 2,
        timeout: float = 5.0,
        cpu_seconds: int = 5,
        memory_bytes: int = 1 << 30,
        max_calls: int = 1000,
    ) -> None:
        self.functions = tuple(functions)
        self.warm = tuple(warm)
        self.timeout = timeout
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.max_calls = max_calls
        self.started = 0  # worker processes started, replacements included
        self.calls = 0
        self.enforced: tuple[str, ...] = ()
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="confined")
        self._lock = threading.Lock()
        self._idle: list[_Process] = []  # warm, waiting for a call
        self._live: set[_Process] = set()
        self._callers: set[str] = set()  # those with a call in flight (CALLER)

    async def call(self, function: str, argument: Any) -> Any:
        """``function(argument)`` in a worker, off the event loop; ``WorkerError`` if none came."""
        import asyncio

        taken_by = time.monotonic() + self.timeout
        caller = CALLER.get()
        if caller is not None:
            await self._take_turn(caller, taken_by)
        future = self._executor.submit(self._call_taken_by, caller, taken_by, function, argument)
        try:
            return await asyncio.wrap_future(future)
        finally:
            if caller is not None and future.cancel():  # never started: its turn ends here
                self._end_turn(caller)

    async def _take_turn(self, caller: str, taken_by: float) -> None:
        """Wait until ``caller`` has no other call in the pool (``WorkersBusy`` past
        ``taken_by``): a caller's calls go one after the other, so no one holds every
        worker and others wait only for calls of other callers. A turn ends when its
        call does, not when its caller stops waiting (a dropped request frees nothing)."""
        import asyncio

        while True:
            with self._lock:
                if caller not in self._callers:
                    self._callers.add(caller)
                    return
            if time.monotonic() > taken_by:
                raise WorkersBusy(f"no worker was free for {caller} within {self.timeout:g} s")
            await asyncio.sleep(0.02)

    def _end_turn(self, caller: str) -> None:
        with self._lock:
            self._callers.discard(caller)

    def _call_taken_by(
        self, caller: str | None, taken_by: float, function: str, argument: Any
    ) -> Any:
        """``call_blocking``, unless the pool took the call after ``taken_by``; then the
        caller's turn ends."""
        try:
            if time.monotonic() > taken_by:
                raise WorkersBusy(f"no worker was free within {self.timeout:g} s")
            return self.call_blocking(function, argument)
        finally:
            if caller is not None:
                self._end_turn(caller)

    def call_blocking(self, function: str, argument: Any) -> Any:
        """The same from a thread (this one waits; the pool's size bounds the workers)."""
        with self._lock:
            self.calls += 1
            process = self._idle.pop() if self._idle else None
        if process is not None and process.calls >= self.max_calls:
            self._discard(process)
            process = None
        if process is None:
            process = self._start()
        try:
            reply = process.ask({"call": function, "argument": argument}, self.timeout)
        except WorkerError:
            self._discard(process)
            raise
        with self._lock:
            self._idle.append(process)
        if "error" in reply:
            raise CallFailed(str(reply["error"]))
        return reply.get("result")

    def close(self) -> None:
        """Stop every worker (they also stop when this process ends)."""
        with self._lock:
            live = list(self._live)
            self._idle.clear()
        for process in live:
            self._discard(process)
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _start(self) -> _Process:
        settings = {
            "functions": self.functions,
            "warm": self.warm,
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
        }
        process = _Process(settings, max(self.timeout, 30.0))
        with self._lock:
            self.started += 1
            self.enforced = process.enforced
            self._live.add(process)
        return process

    def _discard(self, process: _Process) -> None:
        with self._lock:
            self._live.discard(process)
        process.kill()


class _Process:
    """One worker process and its pipes."""

    def __init__(self, settings: dict[str, Any], start_timeout: float) -> None:
        path = [_ROOT, *(entry for entry in sys.path if entry)]  # what this process imports
        code = f"import sys; sys.path[:0] = {path!r}; import {__name__} as m; m.serve()"
        self.popen = subprocess.Popen(
            [sys.executable, "-E", "-s", "-X", "utf8", "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},  # the API's environment (tokens, keys) stays with the API
            close_fds=True,
            cwd="/",
        )
        self.calls = 0
        try:
            self.enforced = tuple(self.ask(settings, start_timeout)["enforced"])
        except WorkerError as error:
            self.kill()
            raise WorkerError(f"a worker could not start: {error}") from None
        self.calls = 0

    def ask(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.calls += 1
        data = orjson.dumps(message)
        try:
            self.popen.stdin.write(_HEADER.pack(len(data)) + data)
            self.popen.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise WorkerDied(f"the worker has ended ({error})") from None
        deadline = time.monotonic() + timeout
        header = self._read(_HEADER.size, deadline)
        reply: dict[str, Any] = orjson.loads(self._read(_HEADER.unpack(header)[0], deadline))
        return reply

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        chunks: list[bytes] = []
        while size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerTimeout("the worker did not answer in time; it was stopped")
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                code = self.popen.wait()
                if code in (-signal.SIGXCPU, -signal.SIGKILL):  # its CPU-time limit
                    raise WorkerTimeout("the worker ran out of CPU time; it was stopped")
                raise WorkerDied(f"the worker ended (status {code}); it was replaced")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                pipe.close()


# the worker's side ---------------------------------------------------------------------


def serve() -> None:
    """A worker's main: set up, confine, answer calls until its input ends."""
    reader, writer = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # what a function prints does not mix with the replies
    settings = _receive(reader)
    if settings is None:
        return
    import importlib

    functions: dict[str, Callable[[Any], Any]] = {}
    for name in {*settings["functions"], *settings["warm"]}:
        module, _, attribute = name.partition(":")
        functions[name] = getattr(importlib.import_module(module), attribute)
    for name in settings["warm"]:
        functions[name](None)
    served = {name: functions[name] for name in settings["functions"]}
    enforced = _confine(settings["memory_bytes"])
    _send(writer, {"enforced": enforced})
    cpu_seconds = int(settings["cpu_seconds"])
    while (message := _receive(reader)) is not None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (spent + cpu_seconds, resource.RLIM_INFINITY))
        function = served.get(str(message.get("call")))
        if function is None:
            _send(writer, {"error": f"no function {message.get('call')!r} here"})
            continue
        try:
            result = function(message.get("argument"))
        except MemoryError:
            os._exit(3)  # its memory is in an unknown state: replaced
        except Exception as error:  # the caller gets the error as a value
            _send(writer, {"error": f"{type(error).__name__}: {error}"})
            continue
        _send(writer, {"result": result})


def _receive(reader: Any) -> dict[str, Any] | None:
    header = reader.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    message: dict[str, Any] = orjson.loads(reader.read(_HEADER.unpack(header)[0]))
    return message


def _send(writer: Any, message: dict[str, Any]) -> None:
    data = orjson.dumps(message)
    writer.write(_HEADER.pack(len(data)) + data)
    writer.flush()


def _confine(memory_bytes: int) -> list[str]:
    """Take away files, network, privileges and room; say what was taken."""
    enforced: list[str] = []
    root = os.geteuid() == 0
    libc = _libc()
    namespaced = False
    if libc is not None:
        flags = _CLONE_NEWNS | _CLONE_NEWNET | (0 if root else _CLONE_NEWUSER)
        namespaced = libc.unshare(flags) == 0
        if namespaced:
            enforced.append("network namespace")
            enforced.append("mount namespace")
    if (root or namespaced) and _empty_root():  # root in a container may chroot, not unshare
        enforced.append("empty root")
    if root:
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
        enforced.append("user nobody")
    if libc is not None:
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
            enforced.append("no new privileges")
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after setuid, which clears it
    limits = {
        "RLIMIT_AS": memory_bytes,
        "RLIMIT_FSIZE": 0,
        "RLIMIT_NOFILE": 3,
        "RLIMIT_NPROC": 0,
        "RLIMIT_CORE": 0,
    }
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError, AttributeError):
            continue
        enforced.append(name)
    enforced.append("RLIMIT_CPU")  # set before each call
    return enforced


def _empty_root() -> bool:
    """Make an empty directory this process's root, deleted so nothing can be made in it."""
    import tempfile

    try:
        path = tempfile.mkdtemp(prefix="shoal-worker-")
        fd = os.open(path, os.O_RDONLY)
        os.rmdir(path)
        os.fchdir(fd)
        os.close(fd)
        os.chroot(".")
        os.chdir("/")
    except OSError:
        return False
    return True


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
