"""A stand-in for the Infrastructure Manager's REST API, for tests that need what IM cannot
do on cue here: fail, answer late, never finish a build, and say who called what when.

It speaks IM's documented wire format (https://imdocs.readthedocs.io, "REST API"), the
one ``shoal.infrastructure.im`` speaks and ``test_im.py`` checks against IM itself:

- ``GET /infrastructures``: ``{"uri-list": [{"uri": …}]}``;
- ``POST /infrastructures`` (``text/yaml``): ``{"uri": …}``; each call makes a new
  infrastructure, as IM's does: a create is NOT idempotent;
- ``GET /infrastructures/{id}/state``: ``{"state": {"state": …, "vm_states": {…}}}``;
  ``/tosca``: ``{"tosca": …}``; ``/outputs``: the template's literal output values;
- ``POST /infrastructures/{id}`` (a new template), ``PUT …/reconfigure``,
  ``DELETE /infrastructures/{id}``;
- an unknown id is a 404, a request without ``Authorization`` a 401.

``infrastructures`` is its inventory, ``calls`` its log: tests assert on them, not on
what Shoal says it did.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web


@dataclass
class Infrastructure:
    template: dict[str, Any]
    made: float = field(default_factory=time.monotonic)  # or last changed


@dataclass(frozen=True)
class Call:
    when: float  # monotonic
    method: str
    path: str  # after /infrastructures: "" for the list and create, "/<id>/state" …


class FakeIm:
    def __init__(self) -> None:
        self.infrastructures: dict[str, Infrastructure] = {}
        self.calls: list[Call] = []
        self.refuse_create: tuple[int, str] | None = None  # status and text of every create
        self.create_delay = 0.0  # seconds between making one and answering its create
        self.build_time: float | None = 0.0  # seconds to configured; None: never
        self.on_delete: Callable[[str], None] | None = None  # called before a delete
        self.states: dict[str, str] = {}  # id -> the IM state to answer instead of its build's
        self.create_answer: str | None = None  # a create's body instead of {"uri": …} (made)
        self._ids = itertools.count(1)
        self.url = ""

    # what tests read --------------------------------------------------------------------

    def count(self, method: str, path: str = "", since: float = 0.0) -> int:
        """Calls of ``method`` whose path ends with ``path``, made after ``since``."""
        return sum(
            1
            for c in self.calls
            if c.method == method and c.path.endswith(path) and c.when >= since
        )

    def marked(self, key: str) -> list[str]:
        """The ids of the infrastructures made for ``key`` (Shoal's mark in the template)."""
        return [
            ident
            for ident, infra in self.infrastructures.items()
            if (infra.template.get("metadata") or {}).get("shoal_infrastructure") == key
        ]

    # the API ----------------------------------------------------------------------------

    def _state(self, infra: Infrastructure) -> str:
        if self.build_time is None or time.monotonic() - infra.made < self.build_time:
            return "running"  # machines up, not configured yet
        return "configured"

    def _uri(self, ident: str) -> str:
        return f"{self.url}/infrastructures/{ident}"

    @web.middleware
    async def _log(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path.removeprefix("/infrastructures")
        self.calls.append(Call(time.monotonic(), request.method, path))
        if "Authorization" not in request.headers:
            return web.Response(status=401, text="No authentication data provided")
        return await handler(request)

    def _get(self, request: web.Request) -> Infrastructure:
        infra = self.infrastructures.get(request.match_info["id"])
        if infra is None:
            raise web.HTTPNotFound(text="Invalid infrastructure ID or access not granted.")
        return infra

    async def _list(self, request: web.Request) -> web.Response:
        listed = [{"uri": self._uri(ident)} for ident in self.infrastructures]
        return web.json_response({"uri-list": listed})

    async def _create(self, request: web.Request) -> web.Response:
        if self.refuse_create is not None:
            status, text = self.refuse_create
            return web.Response(status=status, text=text)
        try:
            template = yaml.safe_load(await request.text())
        except yaml.YAMLError as error:
            return web.Response(status=400, text=f"Error parsing the TOSCA template: {error}")
        ident = f"inf-{next(self._ids)}"
        self.infrastructures[ident] = Infrastructure(template)
        await asyncio.sleep(self.create_delay)  # made, but the answer is late
        if self.create_answer is not None:
            return web.Response(text=self.create_answer, content_type="application/json")
        return web.json_response({"uri": self._uri(ident)})

    async def _state_of(self, request: web.Request) -> web.Response:
        infra = self._get(request)
        state = self.states.get(request.match_info["id"]) or self._state(infra)
        return web.json_response({"state": {"state": state, "vm_states": {"0": state}}})

    async def _tosca(self, request: web.Request) -> web.Response:
        return web.json_response({"tosca": yaml.safe_dump(self._get(request).template)})

    async def _outputs(self, request: web.Request) -> web.Response:
        infra = self._get(request)
        outputs = (infra.template.get("topology_template") or {}).get("outputs") or {}
        return web.json_response({"outputs": {k: v.get("value") for k, v in outputs.items()}})

    async def _change(self, request: web.Request) -> web.Response:
        infra = self._get(request)
        infra.template = yaml.safe_load(await request.text())
        infra.made = time.monotonic()
        return web.Response(text="")

    async def _reconfigure(self, request: web.Request) -> web.Response:
        self._get(request)
        return web.Response(text="")

    async def _delete(self, request: web.Request) -> web.Response:
        ident = request.match_info["id"]
        self._get(request)
        if self.on_delete is not None:
            self.on_delete(ident)
        del self.infrastructures[ident]
        return web.Response(text="")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._log])
        app.router.add_get("/infrastructures", self._list)
        app.router.add_post("/infrastructures", self._create)
        app.router.add_get("/infrastructures/{id}/state", self._state_of)
        app.router.add_get("/infrastructures/{id}/tosca", self._tosca)
        app.router.add_get("/infrastructures/{id}/outputs", self._outputs)
        app.router.add_post("/infrastructures/{id}", self._change)
        app.router.add_put("/infrastructures/{id}/reconfigure", self._reconfigure)
        app.router.add_delete("/infrastructures/{id}", self._delete)
        return app


@asynccontextmanager
async def running_fake_im(make: Callable[[], FakeIm] = FakeIm) -> AsyncIterator[FakeIm]:
    """A FakeIm (or the subclass ``make`` builds) on a free loopback port, its ``url`` set."""
    im = make()
    runner = web.AppRunner(im.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    port = server.sockets[0].getsockname()[1]
    im.url = f"http://127.0.0.1:{port}"
    try:
        yield im
    finally:
        await runner.cleanup()
