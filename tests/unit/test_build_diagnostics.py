"""Compiler output parsing and mapping back into the user's file."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from profsvc.build.diagnostics import FileMap, parse_diagnostics
from profsvc.build.python_problem import HARNESS_PHASES, HarnessStatus, compile_result, unit_line
from profsvc.worker.inline_cache import InlineBuild
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.convert import to_model, to_proto
from profsvc_contract.models import CompileResult, Severity

# Real messages as g++ 12 and nvcc 13 print them (paths shortened).
GCC_LOG = """[1/3] c++ -MMD -MF main.o.d ... -c /cache/k/main.cpp -o main.o
FAILED: main.o
/cache/k/main.cpp: In function 'void pybind11_init_vga(pybind11::module_&)':
/cache/k/main.cpp:4:57: error: 'vga_linear_forward' was not declared in this scope
/cache/k/main.cpp:9:3: warning: unused variable 'x' [-Wunused-variable]
"""
NVCC_LOG = """/cache/k/cuda.cu(25): error: identifier "sm" is undefined
      sum += sm[i];
             ^
/cache/k/cuda.cu(30): warning #177-D: variable "t" was declared but never referenced
ptxas error   : Entry function '_Z3fooPf' uses too much shared data (0x20000 bytes, 0xc000 max)
/usr/bin/ld: cannot find -lfoo: No such file or directory
"""


def test_gcc_messages_with_columns():
    found = parse_diagnostics(GCC_LOG)
    assert [(d.file, d.line, d.column, d.severity) for d in found] == [
        ("main.cpp", 4, 57, Severity.ERROR),
        ("main.cpp", 9, 3, Severity.WARNING),
    ]
    assert found[0].message == "'vga_linear_forward' was not declared in this scope"


def test_nvcc_ptxas_and_linker_messages():
    found = parse_diagnostics(NVCC_LOG)
    assert (found[0].file, found[0].line, found[0].severity) == ("cuda.cu", 25, Severity.ERROR)
    assert found[0].message == 'identifier "sm" is undefined'
    assert (found[1].line, found[1].severity) == (30, Severity.WARNING)
    assert "too much shared data" in found[2].message and found[2].file == ""
    assert "cannot find -lfoo" in found[3].message


def test_lines_map_back_into_the_users_python_file():
    file_map = FileMap()
    file_map.add("cuda.cu", "problem.py", 20 - 3 - 1)
    found = parse_diagnostics(NVCC_LOG, file_map)
    # cuda.cu line 4 is the first line of the user's string, which starts on problem.py line 20.
    assert (found[0].file, found[0].line) == ("problem.py", 25 + 16)


def test_harness_compile_error_status_becomes_a_located_result():
    status = HarnessStatus(
        ok=False,
        stage="compiling",
        kind="compile_error",
        message="Error building extension 'ext'",
        build_log='/c/k/cuda.cu(10): error: expected a ";"\n',
        builds=[
            {
                "name": "ext",
                "cache_key": "k",
                "cached": False,
                "seconds": 1.0,
                "cuda_first_line": 30,
                "cpp_first_line": 0,
                "build_directory": "/c/k",
            }
        ],
    )
    result = compile_result(status, "cand.py", 2.0)
    assert not result.ok
    assert (result.diagnostics[0].file, result.diagnostics[0].line) == ("cand.py", 36)
    assert result.units[0].name == "ext"


def test_harness_phases_the_server_exports_are_the_known_ones_with_plausible_times():
    status = HarnessStatus(ok=True, stage="running", phases={"load": 1.5, "measured_call": 2, "mine": 1.0})
    assert status.phase_seconds() == {"load": 1.5, "measured_call": 2.0}
    # The status file lies where the user's code can write: anything odd is left out, never raised on.
    for phases in (None, {"load": "1"}, {"load": -1.0}, {"load": 1e9}, ["load"]):
        assert HarnessStatus(ok=True, stage="running", phases=phases).phase_seconds() == {}  # type: ignore[arg-type]


@pytest.mark.parametrize("module", ["harness", "judge"])
def test_every_phase_a_worker_times_is_a_known_phase(module: str):
    worker = importlib.import_module(f"profsvc.worker.{module}")
    timed = set(re.findall(r'\bphase\(status, "(\w+)"\)', Path(worker.__file__).read_text()))
    assert timed and timed <= set(HARNESS_PHASES)


def test_warnings_of_an_ok_compile_become_warning_diagnostics_in_the_users_file(tmp_path):
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps({"ok": True, "stage": "compiling", "warnings": ["1 build not made"]}))
    status = HarnessStatus.read(status_file, returncode=0, timed_out=False, output="")
    result = compile_result(status, "seed47.py", 2.0)
    assert result.ok
    assert [(d.file, d.severity, d.message) for d in result.diagnostics] == [
        ("seed47.py", Severity.WARNING, "1 build not made")
    ]


@pytest.mark.parametrize("warnings", ["one", [1], {"a": "b"}])
def test_a_status_with_malformed_warnings_is_not_trusted(tmp_path, warnings):
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps({"ok": True, "stage": "compiling", "warnings": warnings}))
    status = HarnessStatus.read(status_file, returncode=0, timed_out=False, output="")
    assert not status.ok and status.kind == "worker_exit"


def test_each_build_names_its_route_and_why_a_faster_one_was_declined():
    fast = InlineBuild(
        name="add", cache_key="k1", cached=False, seconds=4.5, route="split-light", build_directory="/c/1"
    )
    declined = InlineBuild(
        name="sort",
        cache_key="k2",
        cached=True,
        route="torch",
        route_reason="split_declined",
        route_detail="host code uses thrust, which only nvcc compiles (line 31)",
        build_directory="/c/2",
    )
    # A build that failed has no folder in the cache: it is listed, and said to have failed.
    failed = InlineBuild(name="gemm", cache_key="k3", seconds=2.0, route="torch")
    status = HarnessStatus(ok=True, stage="compiling", builds=[asdict(fast), asdict(declined), asdict(failed)])
    result = compile_result(status, "cand.py", 5.0)
    assert [(u.route, u.route_reason) for u in result.units][:2] == [("split-light", ""), ("torch", "split_declined")]
    assert [u.failed for u in result.units] == [False, False, True]
    assert to_model(to_proto(result, pb.CompileResult), CompileResult) == result
    assert unit_line(result.units[0]) == "built add (4.5 s): route split-light"
    assert unit_line(result.units[1]) == (
        "built sort (cached): route torch; split_declined: host code uses thrust, which only nvcc compiles (line 31)"
    )
    assert unit_line(result.units[2]) == "could not build gemm (2.0 s): route torch"


def test_a_build_recorded_without_a_route_reads_as_unknown():
    status = HarnessStatus(
        ok=True, stage="compiling", builds=[{"name": "e", "cache_key": "k", "cached": True, "seconds": 0}]
    )
    unit = compile_result(status, "cand.py", 1.0).units[0]
    assert (unit.route, unit.route_reason, unit.route_detail) == ("", "", "")
