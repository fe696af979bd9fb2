"""Build a Python problem's load_inline extensions in a worker process."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profsvc.build.diagnostics import FileMap, parse_diagnostics
from profsvc.jobfiles import read_regular
from profsvc.proc import server_note
from profsvc.worker.faults import fault_kind, signal_name
from profsvc_contract.models import BuiltUnit, CompileResult, Diagnostic, JobError, Severity, Stage

HARNESS_MODULE = "profsvc.worker.harness"
# Lines torch's load_inline puts before the user's source: 3 includes in cuda.cu, 1 in main.cpp.
CUDA_PREFIX_LINES = 3
CPP_PREFIX_LINES = 1
LOG_LIMIT = 64 * 1024
# The largest status file read (its build logs are cut to LOG_LIMIT): a job could leave gigabytes there.
STATUS_LIMIT = 8 << 20


# The phases the worker harness and the judge time; the server exports only these.
HARNESS_PHASES = (
    *("load", "prebuild", "first_call", "warmup", "measured_call"),
    # The judge's (profsvc.worker.judge): its set-up, its checks, its side of the exchange with the candidate's
    # process (tensors written and read, with their copies) and its waits for that process's answers; within the
    # benchmark, its parts: the reference built, the timed input sets, the candidate's timing (its wait and
    # exchange), the reference's timing, the refilled-buffers check, the comparison (the speedup's interval, the
    # flags, the clocks).
    *("setup", "correctness", "benchmark", "exchange", "candidate_wait"),
    *("reference_model", "timing_inputs", "candidate_timing", "reference_timing", "reuse_check", "comparison"),
)


@dataclass
class HarnessStatus:
    """What the worker harness wrote to its status file."""

    ok: bool
    stage: str
    kind: str = ""
    message: str = ""
    detail: str = ""
    build_log: str = ""
    builds: list[dict[str, Any]] = field(default_factory=list)
    correctness: dict[str, Any] | None = None
    benchmark: dict[str, Any] | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase of the job
    line: int = 0  # the main file's line an error last passed through
    warnings: list[str] = field(default_factory=list)  # what an OK compile did not check
    # A program's NVTX ranges opened through Python's entry points: how many, and the first distinct names
    # (-1: not counted, as for a problem).
    nvtx_range_count: int = -1
    nvtx_ranges: list[str] = field(default_factory=list)
    # The host's monotonic clock as the worker wrote the file (0: not said): what its exit cost after it.
    written_at: float = 0.0

    def phase_seconds(self) -> dict[str, float]:
        """The known phases with a plausible time: the file lies in the job's folder, where user code can write."""
        phases = self.phases if isinstance(self.phases, dict) else {}
        return {
            name: float(seconds)
            for name, seconds in phases.items()
            if name in HARNESS_PHASES and isinstance(seconds, int | float) and 0 <= seconds < 86400
        }

    def seconds_to_exit(self, ended: float, ran: float) -> float | None:
        """Seconds from the file's writing to the end of its process, seen at `ended` (the same clock) after it ran
        `ran` seconds; None unless both ends are known and the file was written while it ran (it lies where user
        code can write)."""
        seconds = ended - self.written_at
        return seconds if self.written_at and ended and 0 <= seconds <= ran else None

    @classmethod
    def _parse(cls, text: str) -> HarnessStatus | None:
        """The status the file holds, None when it is not the harness's shape (it lies where user code can write)."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("ok"), bool) or not isinstance(data.get("stage"), str):
            return None
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        text_fields = ("kind", "message", "detail", "build_log")
        if any(not isinstance(fields.get(k, ""), str) for k in text_fields):
            return None
        if not isinstance(fields.get("line", 0), int) or not isinstance(fields.get("nvtx_range_count", -1), int):
            return None
        written_at = fields.get("written_at", 0.0)
        if not isinstance(written_at, int | float) or isinstance(written_at, bool):
            fields["written_at"] = 0.0  # a timing only: not said
        builds = fields.get("builds", [])
        if not isinstance(builds, list) or not all(isinstance(b, dict) for b in builds):
            return None
        for name in ("warnings", "nvtx_ranges"):
            texts = fields.get(name, [])
            if not isinstance(texts, list) or not all(isinstance(w, str) for w in texts):
                return None
        return cls(**fields)

    @classmethod
    def read(cls, path: Path, *, returncode: int, timed_out: bool, output: str) -> HarnessStatus:
        """Parse the status file; a worker that died before writing it is reported from its exit."""
        tail = "\n".join(output.strip().splitlines()[-20:])
        try:
            content = read_regular(path, STATUS_LIMIT)
        except FileNotFoundError:
            pass
        else:
            status = cls._parse(content.decode(errors="replace")) if content is not None else None
            if status is not None:
                return status
            return cls(
                ok=False,
                stage="running",
                kind="worker_exit",
                message="the worker's status file is not one the harness wrote (did the job overwrite it?)",
                detail=tail,  # a worker killed while writing it leaves half a file: what it printed says more
            )
        if timed_out:
            return cls(
                ok=False, stage="running", kind="timeout", message="the job ran past its time limit and was killed"
            )
        died = signal_name(returncode)
        return cls(
            ok=False,
            stage="running",
            kind=fault_kind(tail) or ("crash" if died else "worker_exit"),
            # Where the server ended it (its memory limit, the disk's reserve), the server's reason first.
            message=server_note(tail) or f"the worker process died ({died or f'exit status {returncode}'})",
            detail=tail,
        )


def job_error(status: HarnessStatus) -> JobError:
    """The user-facing error of a worker run that failed."""
    return JobError(
        kind=status.kind or "runtime_error",
        stage=Stage.COMPILING if status.kind == "compile_error" else Stage.RUNNING,
        message=status.message,
        detail=status.detail or status.build_log[-4000:],
    )


def source_map(builds: list[dict[str, Any]], user_file: str) -> dict[str, tuple[str, int]]:
    """Generated cuda.cu files of load_inline builds -> (the user's file, line offset), for hotspots."""
    return {
        str(Path(b.get("compiled_in") or b["build_directory"]) / "cuda.cu"): (
            user_file,
            b["cuda_first_line"] - CUDA_PREFIX_LINES - 1,
        )
        for b in builds
        if b.get("cuda_first_line")
    }


def harness_argv(
    python: str, main: Path, reference: Path | None, cache_root: Path, status: Path, mode: str, **options: Any
) -> list[str]:
    """Command line of the worker harness."""
    argv = [python, "-m", HARNESS_MODULE, "--main", str(main), "--cache", str(cache_root), "--status", str(status)]
    argv += ["--mode", mode, "--lineinfo"]
    if reference is not None:
        argv += ["--reference", str(reference)]
    for name, value in options.items():
        argv += [f"--{name}", str(value)]
    return argv


def _error(message: str) -> Diagnostic:
    return Diagnostic(severity=Severity.ERROR, message=message)


def compile_result(status: HarnessStatus, user_file: str, seconds: float) -> CompileResult:
    """Turn the harness status into a CompileResult, diagnostics mapped into the user's file."""
    units = [
        BuiltUnit(
            name=b["name"],
            cache_key=b["cache_key"],
            cached=b["cached"],
            seconds=b["seconds"],
            route=str(b.get("route", "")),
            route_reason=str(b.get("route_reason", "")),
            route_detail=str(b.get("route_detail", "")),
            failed=not b.get("build_directory"),
        )
        for b in status.builds
    ]
    if status.ok:
        warnings = [Diagnostic(file=user_file, severity=Severity.WARNING, message=w) for w in status.warnings]
        return CompileResult(ok=True, diagnostics=warnings, seconds=seconds, units=units)
    if status.kind == "timeout":
        message = f"the build did not finish within its time limit and was killed ({seconds:.0f} s)"
        return CompileResult(ok=False, diagnostics=[_error(message)], seconds=seconds, units=units)
    if status.kind != "compile_error":
        # The module failed before or outside a build (it raised at import, or lacks a name).
        located = Diagnostic(file=user_file, line=status.line, severity=Severity.ERROR, message=status.message)
        return CompileResult(ok=False, diagnostics=[located], log=status.detail, seconds=seconds, units=units)
    file_map = FileMap()
    if status.builds:
        last = status.builds[-1]
        if last["cuda_first_line"]:
            file_map.add("cuda.cu", user_file, last["cuda_first_line"] - CUDA_PREFIX_LINES - 1)
        if last["cpp_first_line"]:
            file_map.add("main.cpp", user_file, last["cpp_first_line"] - CPP_PREFIX_LINES - 1)
    log = status.build_log[-LOG_LIMIT:]
    diagnostics = parse_diagnostics(log, file_map) or [_error(status.message)]
    return CompileResult(ok=False, diagnostics=diagnostics, log=log, seconds=seconds, units=units)


def unit_line(unit: BuiltUnit) -> str:
    """One line per build: what was built, how, and, where a faster route was declined, why."""
    how = "cached" if unit.cached else f"{unit.seconds:.1f} s"
    declined = f"; {unit.route_reason}: {unit.route_detail}" if unit.route_reason else ""
    done = "could not build" if unit.failed else "built"
    return f"{done} {unit.name} ({how}): route {unit.route or 'unknown'}{declined}"
