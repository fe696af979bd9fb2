"""Large messages: refused before they are received (no token), or by the per-message limit (with one); Analyze
uploads come in pieces and are checked against what their first message says; gRPC's connection limits."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import grpc
import pytest

from profsvc.config import ServerConfig, Transport
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.models import KernelSource, SourceFile
from tests.conftest import FIXTURES
from tests.security.servers import raw_call, served

TOKEN = "upload-attack-token"
MIB = 1 << 20
ATTACKERS = 8
# Each attacker's one message: 16 times the server's 4 MiB receive limit.
MESSAGE_BYTES = 64 * MIB
ANALYZE, COMPILE = "/profsvc.v1.Profiler/Analyze", "/profsvc.v1.Profiler/Compile"


def _flood(target: str, metadata: tuple[tuple[str, str], ...]) -> list[grpc.RpcError | list[bytes]]:
    """ATTACKERS concurrent calls, half Analyze, half Compile, each one MESSAGE_BYTES message, all let go at once."""
    payload = bytes(MESSAGE_BYTES)
    start = threading.Barrier(ATTACKERS)
    answers: list[grpc.RpcError | list[bytes]] = []

    def attack(method: str) -> None:
        start.wait()
        answers.append(raw_call(target, method, payload, metadata=metadata))

    threads = [threading.Thread(target=attack, args=(m,)) for m in [ANALYZE, COMPILE] * (ATTACKERS // 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _codes(answers: list[grpc.RpcError | list[bytes]]) -> list[grpc.StatusCode | None]:
    return [a.code() if isinstance(a, grpc.RpcError) else None for a in answers]


def test_unauthenticated_large_messages_are_refused_unread(tmp_path):
    with served(tmp_path, token=TOKEN) as server:
        before = server.peak_memory_bytes()
        answers = _flood(server.target, metadata=())
        grown = server.peak_memory_bytes() - before
        with ProfilerClient(server.target, token=TOKEN, timeout=300) as client:
            assert client.analyze(FIXTURES / "seed47_full.ncu-rep").ok
    # 8 x 64 MiB were sent; received in full they would have taken 512 MiB at once (they did before uploads came
    # in pieces: 59 MiB -> 2.4 GiB for 8 x 250 MB).
    assert grown < MESSAGE_BYTES, f"the server's peak memory grew by {grown / MIB:.0f} MiB"
    assert _codes(answers) == [grpc.StatusCode.UNAUTHENTICATED] * ATTACKERS


def test_authenticated_messages_over_the_receive_limit_are_refused(tmp_path):
    with served(tmp_path, token=TOKEN) as server:
        before = server.peak_memory_bytes()
        answers = _flood(server.target, metadata=server.metadata)
        grown = server.peak_memory_bytes() - before
        with ProfilerClient(server.target, token=TOKEN, timeout=300) as client:
            # The profsvc client says what happened, with the exit code of bad input, not "queue full".
            big = KernelSource(main=SourceFile(name="k.py", content=b"#" * (5 * MIB)))
            with pytest.raises(errors.InvalidRequest) as caught:
                client.compile(big)
            assert caught.value.reason == errors.Reason.SOURCE_TOO_LARGE
            assert client.analyze(FIXTURES / "seed47_full.ncu-rep").ok
    assert grown < ATTACKERS * MESSAGE_BYTES / 2, f"the server's peak memory grew by {grown / MIB:.0f} MiB"
    assert _codes(answers) == [grpc.StatusCode.RESOURCE_EXHAUSTED] * ATTACKERS
    assert all("larger than max" in a.details() for a in answers if isinstance(a, grpc.RpcError))


def _upload(first: pb.AnalyzeRequest, *pieces: bytes) -> list[bytes]:
    return [first.SerializeToString(), *(pb.AnalyzeRequest(chunk=p).SerializeToString() for p in pieces)]


@pytest.mark.parametrize(
    ("messages", "code", "message"),
    [
        ([], grpc.StatusCode.INVALID_ARGUMENT, "the upload ended before its first message arrived"),
        (_upload(pb.AnalyzeRequest(size=0)), grpc.StatusCode.INVALID_ARGUMENT, "the uploaded report is empty"),
        (
            _upload(pb.AnalyzeRequest(size=1 << 40)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the report is 1,099,511,627,776 bytes; the limit is 209,715,200",
        ),
        (
            _upload(pb.AnalyzeRequest(size=10, chunk=b"x" * 6), b"y" * 6),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the upload sends more than the 10 bytes its first message said",
        ),
        (
            _upload(pb.AnalyzeRequest(size=100, chunk=b"x" * 10)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the upload ended after 10 bytes; its first message said 100",
        ),
        (
            [
                pb.AnalyzeRequest(size=20, chunk=b"x" * 10).SerializeToString(),
                pb.AnalyzeRequest(chunk=b"y" * 10, session_id="later").SerializeToString(),
            ],
            grpc.StatusCode.INVALID_ARGUMENT,
            "only the first message of an upload names the file, its size and the options",
        ),
    ],
    ids=["no message", "empty", "over the limit", "more than said", "less than said", "options later"],
)
def test_an_upload_is_held_to_what_its_first_message_says(tmp_path, messages, code, message):
    with served(tmp_path, token=TOKEN) as server:
        answer = raw_call(server.target, ANALYZE, messages, metadata=server.metadata, streaming=(True, False))
        with ProfilerClient(server.target, token=TOKEN, timeout=300) as client:
            assert client.capabilities().server_version
        # Looked at after the next call: the status may reach the client before the server has cleaned up.
        leftovers = list((server.state / "uploads").iterdir())
    assert isinstance(answer, grpc.RpcError)
    assert (answer.code(), answer.details()) == (code, message)
    assert leftovers == []


def _frames(sock: socket.socket) -> Iterator[tuple[int, bytes]]:
    """Read HTTP/2 frames (RFC 9113 section 4.1: 24-bit length, type, flags, stream id, payload) one by one."""
    buffer = b""
    while True:
        while len(buffer) < 9 or len(buffer) < 9 + int.from_bytes(buffer[:3], "big"):
            data = sock.recv(65536)
            if not data:
                return
            buffer += data
        length, kind = int.from_bytes(buffer[:3], "big"), buffer[3]
        yield kind, buffer[9 : 9 + length]
        buffer = buffer[9 + length :]


def _open_http2(target: str) -> socket.socket:
    """A TCP connection that has said the HTTP/2 preface and an empty SETTINGS frame, as a gRPC client does."""
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    return sock


SETTINGS, GOAWAY = 0x4, 0x7
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3


def test_the_server_limits_calls_per_connection_and_the_connections_age(tmp_path):
    config = ServerConfig(state_dir=tmp_path, transport=Transport(max_connection_age_s=1, max_connection_age_grace_s=1))
    embedded = EmbeddedServer(config)
    target = embedded.start()
    try:
        with _open_http2(target) as sock:
            frames = _frames(sock)
            kind, payload = next(frames)
            assert kind == SETTINGS
            settings = dict(struct.iter_unpack(">HI", payload))
            assert settings[SETTINGS_MAX_CONCURRENT_STREAMS] == 64
            # Past its age, the server asks the client to go (GOAWAY), even a connection that never called.
            assert GOAWAY in (kind for kind, _ in frames)
        with ProfilerClient(target, timeout=60) as client:
            assert client.capabilities().server_version
    finally:
        embedded.stop()
