"""``shoal up``'s supervisor: each component a process of its own, restarted when it dies.

Every child is a ``shoal`` command line (``python -m shoal.cli.main ...``) in
a session of its own, so a Ctrl-C reaches only the supervisor, which then
stops the children, the first started (the API) last (SIGTERM, SIGKILL after
a grace period). Children also get SIGTERM from the kernel if the
supervisor dies without stopping them (``PR_SET_PDEATHSIG``), so nothing is
left behind. A child that exits while not asked to is started again after a
back-off that doubles on each quick crash, and the restart is reported.
Each child's output goes to ``<log_dir>/<name>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from shoal.machinery.backoff import Backoff
from shoal.system.process import SHOAL_MAIN, shoal_argv

PR_SET_PDEATHSIG = 1
STABLE = 30.0  # seconds a child must run for its back-off to start over
MAX_BACKOFF = 30.0


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor goes, however it goes."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(eq=False)
class Child:
    """One supervised component: its command line, environment and restart record."""

    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    module: str = SHOAL_MAIN
    after_start: Callable[[], Awaitable[None]] | None = None
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    backoff: Backoff = field(default_factory=lambda: Backoff(0.5, MAX_BACKOFF))
    started: float = 0.0


def _forget(restarts: dict[Child, asyncio.Task[None]], child: Child, _: object) -> None:
    restarts.pop(child, None)


class Supervisor:
    """Starts children, restarts those that die, stops them all on ``stop``."""

    def __init__(self, log_dir: Path, say: Callable[[str], None]) -> None:
        self.log_dir = log_dir
        self.say = say
        self.children: list[Child] = []
        self.stopping = False
        self._watch: asyncio.Task[None] | None = None

    def log_of(self, child: Child) -> Path:
        return self.log_dir / f"{child.name}.log"

    def _spawn(self, child: Child) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_of(child), "ab") as out:
            child.proc = subprocess.Popen(
                shoal_argv(*child.args, module=child.module),
                env={**os.environ, **child.env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        child.started = time.monotonic()

    async def start(self, child: Child) -> Child:
        """Start ``child`` (and run its ``after_start``); it is watched from now on."""
        self._spawn(child)
        self.children.append(child)
        if child.after_start is not None:
            await child.after_start()
        return child

    def pids(self) -> dict[str, int]:
        return {c.name: c.proc.pid for c in self.children if c.proc is not None}

    async def run(self) -> None:
        """Watch the children until cancelled: restart each that exits, with back-off.

        Each restart waits out its own back-off, so one crashing child never delays another's.
        """
        restarts: dict[Child, asyncio.Task[None]] = {}
        try:
            while True:
                for child in self.children:
                    proc = child.proc
                    if proc is None or proc.poll() is None or child in restarts:
                        continue
                    task = asyncio.create_task(self._restart(child, proc.returncode))
                    restarts[child] = task
                    task.add_done_callback(functools.partial(_forget, restarts, child))
                await asyncio.sleep(0.2)
        finally:
            for task in list(restarts.values()):
                task.cancel()

    async def _restart(self, child: Child, code: int) -> None:
        if time.monotonic() - child.started > STABLE:
            child.backoff.succeeded()
        delay = child.backoff.failed()
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        self.say(
            f"{child.name} {how}; restarting in {delay:g} s (log {self.log_of(child)})"
        )
        child.proc = None
        await asyncio.sleep(delay)
        if self.stopping:
            return
        self._spawn(child)
        child.restarts += 1
        assert child.proc is not None
        self.say(f"{child.name} restarted (pid {child.proc.pid}, restart {child.restarts})")
        if child.after_start is not None:
            try:
                await child.after_start()
            except Exception as error:  # the next exit or check retries
                self.say(f"{child.name}: after restart: {type(error).__name__}: {error}")

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM every child but the first, then the first (the API), so that the others'
        last writes still reach it; SIGKILL what is left after ``grace`` at each step."""
        self.stopping = True
        running = [c.proc for c in self.children if c.proc is not None]
        for group in (running[1:], running[:1]):
            for proc in group:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            for proc in group:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
