"""Bearer tokens, TLS, and the refusal to open a non-loopback port without a token."""

from __future__ import annotations

import shutil
import subprocess
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from profsvc.config import Security, ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract import errors
from tests.conftest import FIXTURES, run_cli

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    security = Security(tokens={"tester": TOKEN})
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path_factory.mktemp("tok"), security=security))
    yield embedded.start()
    embedded.stop()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    assert shutil.which("openssl"), "openssl (Debian's openssl package) makes the test certificate"
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return folder / "cert.pem", folder / "key.pem"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, tls_files):
    cert, key = tls_files
    config = ServerConfig(state_dir=tmp_path_factory.mktemp("tls-state"), security=Security(tls_cert=cert, tls_key=key))
    embedded = EmbeddedServer(config)
    yield embedded.start()
    embedded.stop()


def test_missing_and_wrong_tokens_are_unauthenticated(token_server):
    for token in (None, "wrong-token"):
        with ProfilerClient(token_server, token=token) as client, pytest.raises(errors.Unauthenticated) as caught:
            client.capabilities()
        assert caught.value.reason == errors.Reason.UNAUTHENTICATED


def test_streaming_and_health_calls_need_the_token_too(token_server):
    with ProfilerClient(token_server) as client, pytest.raises(errors.Unauthenticated):
        client.profile(load_source(FIXTURES / "seed47.py"))
    with grpc.insecure_channel(token_server) as channel, pytest.raises(grpc.RpcError) as caught:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_valid_token_is_served(token_server):
    with ProfilerClient(token_server, token=TOKEN) as client:
        assert client.analyze(FIXTURES / "seed47_full.ncu-rep").ok


def test_cli_reads_the_token_from_file_and_environment(token_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    report = FIXTURES / "seed47_full.ncu-rep"
    assert run_cli("analyze", report, "--server", token_server, "--token-file", token_file).returncode == 0
    assert run_cli("analyze", report, "--server", token_server, env={"PROFSVC_TOKEN": TOKEN}).returncode == 0
    denied = run_cli("analyze", report, "--server", token_server, env={"PROFSVC_TOKEN": "nope"})
    assert denied.returncode == 7 and "UNAUTHENTICATED" in denied.stderr


def test_tls_handshake_verified_with_the_ca(tls_server, tls_files):
    cert, _ = tls_files
    port = tls_server.rsplit(":", 1)[1]
    with ProfilerClient(f"localhost:{port}", root_certificates=cert.read_bytes(), timeout=30) as client:
        assert client.capabilities().server_version


def test_tls_server_refuses_plaintext_and_unknown_ca(tls_server):
    port = tls_server.rsplit(":", 1)[1]
    with ProfilerClient(f"localhost:{port}", timeout=5) as client, pytest.raises(errors.ServerUnavailable):
        client.capabilities()
    # System roots do not know the self-signed certificate: the client refuses the server.
    with ProfilerClient(f"localhost:{port}", tls=True, timeout=5) as client, pytest.raises(errors.ServerUnavailable):
        client.capabilities()


def test_non_loopback_without_token_is_refused():
    with pytest.raises(ValueError, match=r"refusing to listen on 0\.0\.0\.0 without a token"):
        ServerConfig(host="0.0.0.0")
    assert ServerConfig(host="0.0.0.0", security=Security(insecure=True)).host == "0.0.0.0"
    assert ServerConfig(host="0.0.0.0", security=Security(tokens={"tester": TOKEN})).host == "0.0.0.0"
    assert ServerConfig(host="::1").host == "::1"
    refused = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--insecure" in refused.stderr


def test_metrics_endpoint_counts_requests_by_rpc_and_status(tmp_path):
    import urllib.request

    from tests.conftest import free_port

    port = free_port()
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path, metrics_port=port))
    target = embedded.start()
    try:
        with ProfilerClient(target) as client:
            client.capabilities()
            with pytest.raises(errors.InvalidRequest):
                client.analyze(b"garbage")
        # The interceptor counts a call once its status has gone out: the client can be a moment ahead of it.
        deadline = time.monotonic() + 10
        while True:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            if 'rpc="Analyze"' in text or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        embedded.stop()
    assert 'profsvc_requests_total{code="OK",rpc="GetCapabilities"} 1.0' in text
    assert 'profsvc_requests_total{code="INVALID_ARGUMENT",rpc="Analyze"} 1.0' in text
    assert "profsvc_queue_depth 0.0" in text
    assert 'profsvc_job_stage_seconds_count{stage="parse"} 1.0' in text


def test_metrics_endpoint_shows_where_a_compile_went(tmp_path):
    import urllib.request

    from tests.conftest import free_port

    port = free_port()
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path, metrics_port=port))
    target = embedded.start()
    try:
        with ProfilerClient(target, timeout=300) as client:
            assert client.compile(load_source(FIXTURES / "seed47.py")).ok
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        embedded.stop()
    # The worker's own phase (importing the problem) beside the whole compile stage.
    assert 'profsvc_job_stage_seconds_count{stage="compile"} 1.0' in text
    assert 'profsvc_job_stage_seconds_count{stage="compile:load"} 1.0' in text


_UNPRINTABLE = "is empty or holds characters other than printable ASCII"


@pytest.mark.parametrize(
    ("command", "content", "message"),
    [
        ("capabilities", b"two\nlines\n", _UNPRINTABLE),
        ("capabilities", b"caf\xc3\xa9\n", _UNPRINTABLE),
        ("capabilities", b"\xff\xfe", "is not UTF-8 text"),
        ("capabilities", b"\n", _UNPRINTABLE),
        # The server's token file holds one token a line (tests/security/test_identities.py).
        ("serve", b"caf\xc3\xa9\n", _UNPRINTABLE),
        ("serve", b"\xff\xfe", "is not UTF-8 text"),
        ("serve", b"\n", "holds no token"),
    ],
    ids=["newline inside", "non-ASCII", "not UTF-8", "empty", "serve non-ASCII", "serve not UTF-8", "serve empty"],
)
def test_a_token_no_grpc_header_can_carry_is_one_line(tmp_path, content, message, command):
    token_file = tmp_path / "token"
    token_file.write_bytes(content)
    args = ["--server", "127.0.0.1:1"] if command == "capabilities" else ["--port", "0", "--state-dir", tmp_path]
    done = run_cli(command, *args, "--token-file", token_file)
    assert done.returncode == 2
    assert done.stderr.startswith("profsvc: error: the token") and message in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_an_unreadable_client_config_is_one_line(tmp_path):
    config = tmp_path / "client.toml"
    config.write_text("server = \n")
    done = run_cli("capabilities", env={"PROFSVC_CONFIG": str(config)})
    assert done.returncode == 2
    assert done.stderr.startswith(f"profsvc: error: the client config {config} cannot be read")
