"""JSON documents: a schema version first, maps in key order, no error object on success, errors as documents."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from profsvc_client import cli
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


def test_version_names_the_installed_packages_and_the_schema(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    line = capsys.readouterr().out.strip()
    # The version as the client's own pyproject declares it.
    declared = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["version"]
    assert f"profsvc-client {declared}" in line and line.endswith(f"(JSON schema {SCHEMA_VERSION})")
    assert "\n" not in line


def test_an_unknown_config_key_is_an_error_naming_it_as_json_too(tmp_path, monkeypatch, capsys):
    config = tmp_path / "client.toml"
    config.write_text('sever = "gpu-host:50051"\n')
    monkeypatch.setenv("PROFSVC_CONFIG", str(config))
    monkeypatch.delenv("PROFSVC_SERVER", raising=False)
    code = cli.main(["capabilities", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "unknown key 'sever' (did you mean 'server'?)" in err and err.count("\n") == 1
    document = json.loads(out)
    assert document["schema_version"] == SCHEMA_VERSION and document["ok"] is False
    assert document["error"]["reason"] == "BAD_ARGUMENT" and document["error"]["exit_code"] == 2
    assert "sever" in document["error"]["message"]


def test_a_missing_file_with_json_format_is_a_document(tmp_path, capsys):
    code = cli.main(["compile", str(tmp_path / "absent.py"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["error"]["reason"] == "BAD_ARGUMENT"
    assert "absent.py" in json.loads(out)["error"]["message"] and err.startswith("profsvc: error:")


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


def test_the_progress_line_draws_on_a_terminal_only():
    import io

    from rich.console import Console

    from profsvc_contract.models import Progress

    event = Progress(stage=Stage.PROFILING, message="ncu on kernel[0] (gemm)", passes=9, elapsed_seconds=2.5)
    for terminal in (True, False):
        stream = io.StringIO()
        line = cli.ProgressLine()
        line.console = Console(file=stream, force_terminal=terminal)
        line(event)
        line.close()
        drawn = stream.getvalue()
        assert ("[profiling] ncu on kernel[0] (gemm) (9 passes)  2.5s" in drawn) is terminal, drawn
