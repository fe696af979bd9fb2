"""JSON documents: a schema version first, maps in key order, no error object on success, errors as documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profsvc_contract.document import SCHEMA_VERSION, dumps, error_document, read_document, result_document
from profsvc_contract.models import (
    CorrectnessResult,
    EvaluateResult,
    FigureValue,
    JobError,
    KernelResult,
    ProfileResult,
    Stage,
)

ROOT = Path(__file__).parents[2]


def _profile(names: list[str]) -> ProfileResult:
    figures = {name: FigureValue(value=float(i), unit="ns") for i, name in enumerate(names)}
    timings = {name: 1.0 for name in reversed(names)}
    return ProfileResult(ok=True, kernels=[KernelResult(name="k", figures=figures)], timings=timings)


def test_a_document_starts_with_its_schema_version_and_keeps_maps_in_key_order():
    names = ["occupancy", "duration", "dram_bytes_read", "achieved_fp32_flops"]
    one, two = result_document(_profile(names)), result_document(_profile(list(reversed(names))))
    assert next(iter(one)) == "schema_version" and one["schema_version"] == SCHEMA_VERSION
    assert list(one["kernels"][0]["figures"]) == sorted(names) == list(two["kernels"][0]["figures"])
    assert list(one["timings"]) == sorted(names)
    # Everything else in the model's own order.
    assert list(one)[1:] == [k for k in ProfileResult.model_fields if k != "error"]


def test_success_carries_no_error_object_and_a_failure_its_error():
    assert "error" not in result_document(_profile(["duration"]))
    failed = ProfileResult(
        ok=False, error=JobError(kind="compile_error", message="x.cu:3: error", stage=Stage.COMPILING)
    )
    document = result_document(failed)
    assert document["error"] == {
        "kind": "compile_error", "message": "x.cu:3: error", "stage": "compiling", "kernel": "", "detail": "",
    }  # fmt: skip
    # Nested results too: a passing correctness inside an evaluation has none.
    nested = result_document(EvaluateResult(ok=True, correctness=CorrectnessResult(ok=True, trials=5, passed=5)))
    assert "error" not in nested and "error" not in nested["correctness"]


def test_a_document_reads_back_as_its_model_and_a_newer_schema_is_refused():
    result = _profile(["duration", "occupancy"])
    assert read_document(dumps(result_document(result)), ProfileResult) == result
    newer = json.dumps({"schema_version": SCHEMA_VERSION + 1, "ok": True})
    with pytest.raises(ValueError, match="schema_version"):
        read_document(newer, ProfileResult)


def test_the_published_schemas_are_current_and_documents_meet_them():
    import jsonschema

    check = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema.py"), "--check"], capture_output=True)
    assert check.returncode == 0, check.stdout
    schema = json.loads((ROOT / "docs" / "schema" / "profile.schema.json").read_text())
    error = JobError(kind="runtime_error", message="boom", stage=Stage.RUNNING)
    for result in (_profile(["duration"]), ProfileResult(ok=False, error=error)):
        jsonschema.validate(json.loads(dumps(result_document(result))), schema)
    with pytest.raises(jsonschema.ValidationError):  # a document without its version is not one
        jsonschema.validate({k: v for k, v in result_document(_profile([])).items() if k != "schema_version"}, schema)
    errors_schema = json.loads((ROOT / "docs" / "schema" / "error.schema.json").read_text())
    jsonschema.validate(error_document("BAD_ARGUMENT", "no such file", 2), errors_schema)
