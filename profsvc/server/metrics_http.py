"""The Prometheus /metrics endpoint, behind the gRPC port's own door: the same bearer tokens and the same TLS.

Prometheus scrapes that way with its standard settings (`authorization: {credentials_file: ...}` and
`tls_config: {ca_file: ...}`). The endpoint binds loopback unless `--metrics-host` says otherwise; a
non-loopback address needs a token (or --insecure), as the gRPC host does.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from profsvc.server.auth import Authenticator, bearer_token

# A client that connects and says nothing holds its thread this long at most.
CLIENT_TIMEOUT_S = 10.0


class _QuietHandler(WSGIRequestHandler):
    timeout = CLIENT_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """Not on stderr: the server logs JSON lines."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def _guarded(app: Callable[..., Iterable[bytes]], authenticator: Authenticator) -> Callable[..., Iterable[bytes]]:
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if authenticator.required and authenticator.identify(bearer_token(environ.get("HTTP_AUTHORIZATION"))) is None:
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("WWW-Authenticate", 'Bearer realm="profsvc"')]
            start_response("401 Unauthorized", headers)
            return [b"this endpoint needs the server's bearer token (authorization: Bearer <token>)\n"]
        return app(environ, start_response)

    return guarded


def serve_metrics(
    host: str,
    port: int,
    registry: CollectorRegistry,
    authenticator: Authenticator,
    tls: tuple[Path, Path] | None,
) -> WSGIServer:
    """Serve /metrics on host:port in a background thread (TLS with the (certificate, key) pair when given)."""
    server_class = _Server6 if ":" in host else _Server
    server = make_server(
        host.strip("[]"), port, _guarded(make_wsgi_app(registry), authenticator), server_class, _QuietHandler
    )
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        # The handshake happens in the connection's own thread (at its first read), not in the accepting one:
        # a client that connects and never speaks TLS does not stop the others.
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, name="profsvc-metrics", daemon=True).start()
    return server
