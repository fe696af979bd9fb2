"""Options with a fixed set of values: one a server does not know (a number a newer client's proto has) is
INVALID_ARGUMENT in one line listing the values, before any job starts."""

from __future__ import annotations

import grpc
import pytest

from profsvc_contract._proto import profiler_pb2 as pb
from tests.conftest import FIXTURES
from tests.security.servers import raw_call, served

SOURCE = pb.KernelSource(main=pb.SourceFile(name="seed47.py", content=(FIXTURES / "seed47.py").read_bytes()))
PRECISIONS = "precision '9' is not one of fp32, fp16, bf16"
CLOCK_CONTROLS = "clock control '9' is not one of none, base"
CASES = {
    "CheckCorrectness precision": (
        "CheckCorrectness",
        pb.CheckCorrectnessRequest(source=SOURCE, precision=9),
        PRECISIONS,
    ),
    "Benchmark precision": ("Benchmark", pb.BenchmarkRequest(source=SOURCE, precision=9), PRECISIONS),
    "Evaluate precision": ("Evaluate", pb.EvaluateRequest(source=SOURCE, precision=9), PRECISIONS),
    "Evaluate clock control": (
        "Evaluate",
        pb.EvaluateRequest(source=SOURCE, precision=pb.PRECISION_BF16, clock_control=9),
        CLOCK_CONTROLS,
    ),
    "Profile clock control": ("Profile", pb.ProfileRequest(source=SOURCE, clock_control=9), CLOCK_CONTROLS),
}
STREAMED = {"Evaluate", "Profile"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("choices")) as running:
        yield running


@pytest.mark.parametrize("case", list(CASES))
def test_a_value_the_server_does_not_know_is_invalid_argument_listing_the_choices(server, case):
    method, request, message = CASES[case]
    streaming = (False, method in STREAMED)
    answer = raw_call(
        server.target, f"/profsvc.v1.Profiler/{method}", request.SerializeToString(), streaming=streaming, timeout=60
    )
    assert isinstance(answer, grpc.RpcError)
    assert (answer.code(), answer.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
