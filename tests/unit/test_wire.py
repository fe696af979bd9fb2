"""The wire contract: committed stubs are current, and results survive proto round trips."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.convert import message_to_dict, to_model, to_proto
from profsvc_contract.models import ProfileResult, Progress, Stage
from tests.conftest import REPORTS

ROOT = Path(__file__).resolve().parents[2]


def test_generated_stubs_match_the_proto():
    pytest.importorskip("grpc_tools", reason="grpcio-tools (a dev dependency) generates the stubs")
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_protos.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_proto_message_and_rpc_is_commented():
    text = (ROOT / "protos" / "profsvc" / "v1" / "profiler.proto").read_text().splitlines()
    for index, line in enumerate(text):
        if line.strip().startswith(("message ", "rpc ", "service ", "enum ")):
            assert text[index - 1].strip().startswith("//"), f"line {index + 1} has no comment: {line.strip()}"


def test_profile_result_round_trips_through_protobuf():
    analysis = analyze_report(REPORTS[0])
    result = ProfileResult(ok=True, job_id="j", device=analysis.device, kernels=analysis.kernels)
    result.kernels[0].figures["absent"] = result.kernels[0].figures["duration"].model_copy(update={"value": None})
    message = to_proto(result, pb.ProfileResult)
    assert not message.kernels[0].figures["absent"].HasField("value")
    assert to_model(message, ProfileResult) == result


def test_enums_cross_without_prefix():
    message = to_proto(Progress(stage=Stage.PROFILING, pass_=3, passes=38), pb.Progress)
    assert message.stage == pb.STAGE_PROFILING
    assert getattr(message, "pass") == 3
    assert message_to_dict(message)["stage"] == "profiling"
