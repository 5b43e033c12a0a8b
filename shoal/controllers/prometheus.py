"""Serving a component's Prometheus metrics (each process's ``/metrics``).

Each component defines its own metrics in its package (``scheduler/stats.py``,
``kube/stats.py``…); the runtime serves the process's registry, with
``--metrics-port`` (the API serves its own on ``/metrics``); ``shoal up
--single-process`` and tests that run components inside the API's process expose
them on the API's ``/metrics``.
They name tenants' namespaces and clusters: with ``$SHOAL_METRICS_TOKEN`` set
(``shoal up`` sets it), a scrape must present it as a bearer token.
Names follow Prometheus conventions: a ``shoal_`` prefix, the component,
base units (seconds) and ``_total`` on counters. docs/observability.md lists
them with PromQL queries.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app

TOKEN_SETTING = "SHOAL_METRICS_TOKEN"
"""The bearer token a scrape of a component's ``/metrics`` must present (unset: none)."""

#: Buckets of a latency histogram, in seconds: every component's the same.
LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_token(app: WsgiApp, token: str) -> WsgiApp:
    """``app`` for requests with ``Authorization: Bearer <token>`` (compared in constant
    time); a 401 for the others."""
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode("latin-1", "replace")
        if hmac.compare_digest(given, expected):
            return app(environ, start_response)
        body = b"metrics: send the scrape token as a bearer token\n"
        headers = [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="shoal"')]
        start_response("401 Unauthorized", headers)
        return [body]

    return guarded


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape."""


def serve_metrics(port: int, addr: str, token: str | None) -> WSGIServer:
    """This process's registry on ``http://addr:port/metrics`` (a thread of its own),
    for scrapes that present ``token`` when one is given."""
    from prometheus_client.exposition import ThreadingWSGIServer

    app: WsgiApp = make_wsgi_app(REGISTRY)
    if token:
        app = with_token(app, token)
    server = make_server(addr, port, app, ThreadingWSGIServer, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
