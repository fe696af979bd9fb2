"""Request sizes: lists and strings no other rule bounds are refused in one line, and a job line longer than
the warm worker's FIFO buffer still reaches the worker whole."""

from __future__ import annotations

import logging

import grpc
import pytest

from profsvc.config import Limits, ServerConfig
from profsvc_client.client import ProfilerClient
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.models import KernelFilter
from tests.conftest import FIXTURES
from tests.security.servers import ThreadServer, raw_call, served

SEED = (FIXTURES / "seed47.py").read_bytes()
REPORT = FIXTURES / "seed47_default.ncu-rep"
# The case: an Analyze with 7,000 NVTX includes hung to its deadline.
MANY_RANGES = [f"range_{i}/" for i in range(7000)]
MIB = 1 << 20


def _source(**fields: object) -> pb.KernelSource:
    return pb.KernelSource(main=pb.SourceFile(name="seed47.py", content=SEED), **fields)


def _first_upload_message(kernel_filter: pb.KernelFilter) -> list[bytes]:
    data = REPORT.read_bytes()
    first = pb.AnalyzeRequest(filename=REPORT.name, size=len(data), chunk=data, filter=kernel_filter)
    return [first.SerializeToString()]


CASES = {
    "7,000 NVTX ranges in Analyze": (
        "Analyze",
        _first_upload_message(pb.KernelFilter(nvtx_include=MANY_RANGES)),
        "the filter names 7,000 NVTX ranges; the limit is 32",
    ),
    "7,000 NVTX ranges in Profile": (
        "Profile",
        pb.ProfileRequest(source=_source(), filter=pb.KernelFilter(nvtx_include=MANY_RANGES)).SerializeToString(),
        "the filter names 7,000 NVTX ranges; the limit is 32",
    ),
    "a 1 MiB NVTX range": (
        "Analyze",
        _first_upload_message(pb.KernelFilter(nvtx_include=["r" * MIB + "/"])),
        "an NVTX include is 1,048,577 characters long; the limit is 1,024",
    ),
    "a 1 MiB kernel regex": (
        "Profile",
        pb.ProfileRequest(source=_source(), filter=pb.KernelFilter(name_regex="k" * MIB)).SerializeToString(),
        "the kernel name regex is 1,048,576 characters long; the limit is 1,024",
    ),
    "a 1 MiB metric set name": (
        "Profile",
        pb.ProfileRequest(source=_source(), metric_set="m" * MIB).SerializeToString(),
        "the metric set's name is 1,048,576 characters long; the limit is 256",
    ),
    "a 1 MiB nvcc flag": (
        "Compile",
        pb.CompileRequest(source=_source(nvcc_flags=["-D" + "X" * MIB])).SerializeToString(),
        "an nvcc flag is 1,048,578 characters long; the limit is 256",
    ),
    "a 1 MiB upload name": (
        "Analyze",
        [pb.AnalyzeRequest(filename="n" * MIB, size=1, chunk=b"x").SerializeToString()],
        "the report's file name is 1,048,576 characters long; the limit is 4,096",
    ),
}
SHAPES = {"Analyze": (True, False), "Profile": (False, True), "Compile": (False, False)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("bounds")) as running:
        yield running


@pytest.mark.parametrize("case", list(CASES))
def test_oversized_lists_and_strings_are_invalid_argument_in_one_line(server, case):
    method, payload, message = CASES[case]
    answer = raw_call(server.target, f"/profsvc.v1.Profiler/{method}", payload, streaming=SHAPES[method], timeout=60)
    assert isinstance(answer, grpc.RpcError)
    assert (answer.code(), answer.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    with ProfilerClient(server.target, timeout=300) as client:
        assert client.analyze(REPORT).ok


def test_a_job_line_longer_than_the_fifo_buffer_reaches_the_worker_whole(tmp_path, caplog):
    # A limit raised so far that the analyze worker's command line (its filter as JSON: 10,000 x "profsvc/") is
    # about 120 kB, twice a Linux pipe's 64 KiB buffer: the line goes to the worker in several writes. The caller's
    # first report is read on a warm worker, the next ones on the reader that stays (scheduler.readers).
    caplog.set_level(logging.INFO, logger="profsvc.readers")
    limits = Limits(max_nvtx_includes=20_000)
    config = ServerConfig(state_dir=tmp_path, limits=limits, warm_workers=True, compile_workers=1)
    many = KernelFilter(nvtx_include=["profsvc/"] * 10_000)
    with ThreadServer(config) as target, ProfilerClient(target, timeout=240) as client:
        on_warm_worker = client.analyze(REPORT, kernel_filter=many)
        one = client.analyze(REPORT, kernel_filter=KernelFilter(nvtx_include=["profsvc/"]))
        on_reader = client.analyze(REPORT, kernel_filter=many)
    # The seed's one kernel ran in the harness's NVTX range "profsvc" (the same filter once, or 10,000 times).
    assert len(one.kernels) == 1
    assert [k.name for k in on_warm_worker.kernels] == [k.name for k in on_reader.kernels] == [one.kernels[0].name]
    assert "a report reader for anonymous started" in caplog.text
