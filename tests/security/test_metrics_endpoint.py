"""The Prometheus endpoint: loopback unless --metrics-host widens it (refused without a token unless
--insecure), and behind the gRPC port's own token and TLS."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from profsvc.config import Security, ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from tests.conftest import free_port, run_cli
from tests.security.servers import served

TOKEN = "metrics-attack-token"
LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp (include/net/tcp_states.h: TCP_LISTEN = 10)


def _listening(port: int) -> set[str]:
    """The local addresses listening on TCP `port`, read from the kernel's tables (/proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] != LISTEN or int(port_hex, 16) != port:
                continue
            # Each 32-bit word of the address is in the host's (little-endian) byte order.
            raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, width, 8))
            found.add(socket.inet_ntop(socket.AF_INET if width == 8 else socket.AF_INET6, raw))
    return found


def _get(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_stay_on_loopback_when_grpc_listens_everywhere_and_need_the_token(tmp_path):
    port = free_port()
    with served(tmp_path, "--host", "0.0.0.0", "--metrics-port", port, token=TOKEN) as server:
        addresses = _listening(port)
        refused, _ = _get(f"http://127.0.0.1:{port}/metrics")
        wrong, _ = _get(f"http://127.0.0.1:{port}/metrics", token="not-" + TOKEN)
        with ProfilerClient(server.target, token=TOKEN, timeout=60) as client:
            client.capabilities()
        status, text = _get(f"http://127.0.0.1:{port}/metrics", token=TOKEN)
    # Before, /metrics bound the gRPC host: 0.0.0.0, open to anyone, token or not.
    assert addresses == {"127.0.0.1"}
    assert (refused, wrong) == (401, 401)
    assert status == 200 and 'profsvc_requests_total{code="OK",rpc="GetCapabilities"} 1.0' in text


def test_a_wider_metrics_host_needs_a_token_or_insecure(tmp_path):
    metrics = ["--metrics-port", "0", "--metrics-host", "0.0.0.0"]
    refused = run_cli("serve", "--port", "0", "--state-dir", tmp_path, *metrics)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert "refusing to serve metrics on 0.0.0.0 without a token" in refused.stderr
    assert ServerConfig(metrics_host="0.0.0.0", metrics_port=0, security=Security(insecure=True)).metrics_host
    assert ServerConfig(metrics_host="0.0.0.0", metrics_port=0, security=Security(tokens={"ops": TOKEN})).metrics_host
    # Without --metrics-port there is no endpoint to refuse.
    assert ServerConfig(metrics_host="0.0.0.0").metrics_port is None


@pytest.fixture
def tls_files(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return tmp_path / "cert.pem", tmp_path / "key.pem"


def test_metrics_are_served_over_the_servers_tls(tmp_path, tls_files):
    cert, key = tls_files
    port = free_port()
    security = Security(tokens={"ops": TOKEN}, tls_cert=cert, tls_key=key)
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path / "state", security=security, metrics_port=port))
    embedded.start()
    trusted = ssl.create_default_context(cafile=str(cert))
    try:
        # A client that connects and never speaks TLS does not hold the endpoint up for the next one.
        with socket.create_connection(("127.0.0.1", port), timeout=30):
            status, text = _get(f"https://localhost:{port}/metrics", token=TOKEN, context=trusted)
        refused, _ = _get(f"https://localhost:{port}/metrics", context=trusted)
        with pytest.raises(OSError):
            _get(f"http://127.0.0.1:{port}/metrics", token=TOKEN)
    finally:
        embedded.stop()
    assert status == 200 and "profsvc_queue_depth" in text
    assert refused == 401
