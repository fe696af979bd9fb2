"""Bytes that are not the method's protobuf message: INVALID_ARGUMENT in one line, for every kind of method
(the Profiler's, health, reflection), and no traceback in the server's log."""

from __future__ import annotations

import grpc
import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract._proto import profiler_pb2 as pb
from tests.conftest import FIXTURES
from tests.security.servers import raw_call, served

TOKEN = "malformed-attack-token"
# Not protobuf: a tag with wire type 7 (none exists), a length running past the end, a field number 0.
GARBAGE = {"wire type 7": b"\x0f\x01", "truncated": b"\x0a\x7fab", "field 0": b"\x00\x01"}
METHODS = {
    "/profsvc.v1.Profiler/Compile": (False, False),
    "/profsvc.v1.Profiler/Profile": (False, True),
    "/profsvc.v1.Profiler/Analyze": (True, False),
    "/profsvc.v1.Profiler/GetArtifact": (False, True),
    "/grpc.health.v1.Health/Check": (False, False),
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": (True, True),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("malformed"), token=TOKEN) as running:
        yield running


@pytest.mark.parametrize("garbage", list(GARBAGE))
@pytest.mark.parametrize("method", list(METHODS))
def test_bytes_that_do_not_decode_are_invalid_argument_in_one_line(server, method, garbage):
    request_streaming, _ = METHODS[method]
    payload = [GARBAGE[garbage]] if request_streaming else GARBAGE[garbage]
    answer = raw_call(server.target, method, payload, metadata=server.metadata, streaming=METHODS[method])
    assert isinstance(answer, grpc.RpcError)
    name = method.rsplit("/", 1)[1]
    expected = f"the {name} request does not decode as its protobuf message"
    assert (answer.code(), answer.details()) == (grpc.StatusCode.INVALID_ARGUMENT, expected)
    with ProfilerClient(server.target, token=TOKEN, timeout=300) as client:
        assert client.capabilities().server_version


def test_a_later_piece_of_an_upload_that_does_not_decode_is_invalid_argument(server):
    first = pb.AnalyzeRequest(filename="r.ncu-rep", size=4, chunk=b"NV").SerializeToString()
    answer = raw_call(
        server.target,
        "/profsvc.v1.Profiler/Analyze",
        [first, GARBAGE["truncated"]],
        metadata=server.metadata,
        streaming=(True, False),
    )
    assert isinstance(answer, grpc.RpcError)
    assert answer.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert answer.details() == "the Analyze request does not decode as its protobuf message"
    with ProfilerClient(server.target, token=TOKEN, timeout=300) as client:
        assert client.analyze(FIXTURES / "seed47_default.ncu-rep").ok
    # Looked at after the next call: the status may reach the client before the server has cleaned up.
    assert list((server.state / "uploads").iterdir()) == []


def test_the_server_log_holds_no_traceback(server):
    for method, shape in METHODS.items():
        payload = [GARBAGE["wire type 7"]] if shape[0] else GARBAGE["wire type 7"]
        raw_call(server.target, method, payload, metadata=server.metadata, streaming=shape)
    log = server.log_text()
    # The log ran for the whole module: every malformed request above is in it.
    assert "Traceback" not in log and "DecodeError" not in log
    assert "does not decode as its protobuf message" in log
