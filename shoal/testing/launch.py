"""Shoal's processes for tests and benches: started as an operator would, awaited, stopped.

Every process is the ``shoal`` command line (``shoal.system.process.shoal_argv``), as
under ``shoal up``'s supervisor, so
the API, the scheduler and the controllers run exactly as ``shoal api``,
``shoal scheduler`` and ``shoal reschedule-controller`` do in production,
with no user configuration but the security ``shoal up`` ships
(``shoal.testing.shipped``): the API with its ``api.yaml``, each component with its own
token. Crash tests ``kill`` them (SIGKILL); everything else ends with ``stop`` (SIGTERM,
SIGKILL if that is not enough).
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

from shoal.client.rest import ShoalClient
from shoal.machinery.ports import free_port as free_port  # tests and benches take them here
from shoal.machinery.ports import free_ports as free_ports
from shoal.system.process import shoal_argv
from shoal.testing import shipped
from shoal.testing.wait import wait_for

ROOT = str(Path(__file__).resolve().parents[2])


def shoal_env(config: str = os.devnull) -> dict[str, str]:
    """This environment with ``shoal`` importable and only ``config`` as its configuration."""
    extra = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=ROOT + (os.pathsep + extra if extra else ""))
    env["SHOAL_CONFIG"] = config
    env.pop("SHOAL_API", None)
    env.pop("SHOAL_STORE", None)
    return env


def spawn_shoal(
    *args: str,
    log: Path | None = None,
    cpu: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``shoal ARGS`` in a process of its own.

    Its output goes to ``log`` when given; otherwise stdout is dropped and
    stderr (warnings, tracebacks) shows. ``cpu`` pins it to one core, so a
    bench's server and scheduler do not compete for the same one. ``env``: variables
    added to ``shoal_env()`` (``SHOAL_TOKEN``...).
    """
    out = open(log, "ab") if log is not None else None
    try:
        proc = subprocess.Popen(
            shoal_argv(*args),
            env={**shoal_env(), **(env or {})},
            cwd=ROOT,
            stdout=out if out is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if out is not None else None,
            stdin=subprocess.DEVNULL,
        )
    finally:
        if out is not None:
            out.close()
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(proc.pid, {cpu % (os.cpu_count() or 1)})
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, SIGKILL after a few seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def terminate(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM, and its exit code once it has stopped (SIGKILL after ``timeout``): awaited,
    for a process whose way out talks to servers on the caller's own loop (``stop`` would
    block that loop while the process waits on it)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await wait_for(lambda: proc.poll() is not None, timeout, 0.1, "the process to exit")
        finally:
            kill(proc)  # a no-op once it has exited
    return proc.returncode


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL, as a crash would."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def controller(
    command: str,
    api_url: str,
    *args: str,
    log: Path | None = None,
    log_level: str = "warning",
    cpu: int | None = None,
    ca: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``shoal COMMAND --api URL ARGS``: the scheduler or one controller, with the token
    ``shoal up`` gives that component (an open API ignores it); ``ca``: the CA it trusts
    the API's certificate by (``$SHOAL_CA``, as ``shoal up --tls`` gives it)."""
    identity = {"SHOAL_TOKEN": shipped.token(command)}
    if ca is not None:
        identity["SHOAL_CA"] = str(ca)
    return spawn_shoal(
        command, "--api", api_url, "--log-level", log_level, *args, log=log, cpu=cpu, env=identity
    )


class ApiProcess:
    """``shoal api --store URL --port N`` on a free port, in a process of its own, with the
    security ``shoal up`` ships; ``secured=False`` for an open API (say why where you do).
    ``tls=True`` serves HTTPS as ``shoal up --tls`` (what pull clusters join); ``port``
    starts it again where an earlier one listened (its clients' URL unchanged)."""

    def __init__(
        self,
        store: str,
        *,
        log: Path | None = None,
        cpu: int | None = None,
        kube_finalizer: bool = False,
        secured: bool = True,
        tls: bool = False,
        port: int | None = None,
    ) -> None:
        self.store = store
        self.port = port or free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.secured = secured
        self.ssl: ssl.SSLContext | bool = True
        extra = ["--kube-finalizer"] if kube_finalizer else []
        if tls:
            config = shipped.setup().directory / "api.yaml"  # shoal up --tls's
            extra += ["--config", str(config)]
            self.ssl = ssl.create_default_context(cafile=str(config.parent / "ca.crt"))
        elif secured:
            extra += ["--config", str(shipped.api_config())]
        self.proc = spawn_shoal(
            "api", "--store", store, "--port", str(self.port), "--log-level", "warning",
            *extra, log=log, cpu=cpu,
        )  # fmt: skip

    def client(self, user: str = shipped.ADMIN, **options: Any) -> ShoalClient:
        """A client as ``user`` (``admin`` or a component) with the token ``shoal up`` gives."""
        return shipped.client(self.url, user, **options)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until ``/readyz`` answers 200; AssertionError if the process exits first."""

        async def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"API exited with {self.proc.returncode}")
            try:
                async with aiohttp.ClientSession() as http:
                    async with http.get(self.url + "/readyz", ssl=self.ssl) as answer:
                        return answer.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, timeout=timeout, interval=0.1, message=f"API on {self.url}")

    def stop(self) -> None:
        stop(self.proc)
