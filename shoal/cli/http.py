"""A small synchronous JSON client for commands that read or delete: ``get``, ``list``, completion.

The async ``ShoalClient`` (aiohttp and the pydantic models) takes about a
third of a second to import; a command that prints a table needs neither, so
it sends its one or two requests with ``machinery/synchttp.py`` (the standard
library's socket) and works on the JSON the API answered. Errors become
``CliError`` in the user's words: a ``Problem`` for Shoal's problem documents,
"not a Shoal API" for a server that answers something else, "cannot reach" for
no answer.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from shoal.cli.errors import (
    CliError,
    is_shoal_problem,
    not_shoal,
    problem_message,
    unreachable,
    untrusted,
)
from shoal.client.credentials import Credentials
from shoal.machinery.synchttp import NotHttp, Unreachable, Untrusted, send, with_query


class Problem(CliError):
    """An error answer of the API, with its problem document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(problem_message(status, problem))
        self.status = status
        self.problem = problem


class Http:
    """One API URL; every request opens and closes its own connection (a command sends few)."""

    def __init__(
        self, url: str, timeout: float = 30.0, credentials: Credentials | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.credentials = credentials or Credentials.resolve()
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"API URL {url!r} must look like http://host:port", 2)
        self._https = parts.scheme == "https"
        self.timeout = timeout

    def _send(self, method: str, path: str, body: Any = None) -> tuple[int, bytes, str]:
        """One exchange: status, body, content type; no answer at all is "cannot reach"."""
        context = self.credentials.ssl_context() if self._https else None
        try:
            answer = send(method, self.url + path, body=body, token=self.credentials.token,
                          timeout=self.timeout, context=context)  # fmt: skip
        except Unreachable:
            raise unreachable(self.url) from None
        except Untrusted as error:
            raise untrusted(self.url, str(error)) from None
        except NotHttp:
            raise not_shoal(self.url, "no HTTP answer", path) from None
        return answer.status, answer.body, answer.content_type

    def request(
        self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None
    ) -> Any:
        """The decoded JSON answer; a ``Problem``, or a ``CliError`` when it is not Shoal."""
        path = with_query(path, params)
        status, content, _ = self._send(method, path, body)
        try:
            document = json.loads(content) if content else None
        except ValueError:
            document = None
        if status >= 400:
            if not is_shoal_problem(document):
                identify(self.url, self)
                raise CliError(f"{self.url} answered {status} to {method} {path}")
            assert isinstance(document, dict)
            raise Problem(status, document)
        if document is None and content:
            identify(self.url, self)
        return document

    def list(self, path: str, params: dict[str, Any] | None = None) -> tuple[list[Any], int]:
        """Every item of a collection (following ``continue``), and the first page's revision."""
        query = dict(params or {})
        items: list[Any] = []
        revision: int | None = None
        while True:
            page = self.request("GET", path, query)
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                identify(self.url, self)
                raise CliError(f"{self.url} answered GET {path} with no list")
            items.extend(page["items"])
            metadata = page.get("metadata") or {}
            if revision is None:
                revision = int(metadata.get("resource_version") or 0)
            if not metadata.get("continue"):
                return items, revision
            query["continue"] = metadata["continue"]


def identify(url: str, client: Http | None = None) -> None:
    """Return when ``url`` answers ``/healthz`` as Shoal does; else raise "not a Shoal API"."""
    client = client or Http(url, timeout=5.0)
    status, content, _ = client._send("GET", "/healthz")
    try:
        ok = status == 200 and json.loads(content) == {"status": "ok"}
    except ValueError:
        ok = False
    if not ok:
        raise not_shoal(client.url, status, body=content)
