"""profsvc for agent harnesses: the agent's tools over the Model Context Protocol (MCP).

    profsvc mcp --server gpu-host:50051                          # stdio: the harness spawns it
    profsvc mcp --transport http --port 8000 --server gpu-host:50051   # http://127.0.0.1:8000/mcp

Six tools, named as in an agent trace of a KernelBench harness: `compile_kernel`,
`run_correctness`, `profile_kernel`, `static_check`, `submit_kernel` (profsvc's
Evaluate) and `analyze_report` (an existing .ncu-rep). Each answers with a short
text report for the model and the full typed result as structured content, whose
JSON schema is the tool's output schema. A profsvc error (bad input, no GPU, a
full queue, ...) is a tool error: one line with its reason code, never a traceback.

Built on the official MCP Python SDK (`pip install './client[mcp]'`), v2 API:
`mcp.server.mcpserver.MCPServer`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import inspect
import ipaddress
import os
import re
import socket
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import metadata
from pathlib import Path
from typing import Annotated, Concatenate, Literal, ParamSpec

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from profsvc_client.client import ProfilerClient
from profsvc_client.policy import read_policy_file, with_overrides
from profsvc_contract import errors
from profsvc_contract.models import (
    CompileResult,
    CorrectnessResult,
    EvaluateResult,
    KernelFilter,
    KernelSource,
    Precision,
    ProfileResult,
    SourceFile,
    StaticCheckResult,
    StaticPolicy,
)

P = ParamSpec("P")
ClientFactory = Callable[[], AbstractContextManager[ProfilerClient]]

INSTRUCTIONS = """\
profsvc compiles, checks, times and profiles CUDA kernels on a GPU server under NVIDIA Nsight Compute.
kernel_code is either a KernelBench-style Python module (ModelNew with kernels built by
torch.utils.cpp_extension.load_inline; the reference Model comes from reference_code or the server's
configured reference) or a standalone CUDA C++ program with int main().
Usual loop: compile_kernel -> run_correctness -> profile_kernel (hardware counters, stall reasons, hints)
-> static_check -> submit_kernel."""

KernelCode = Annotated[
    str,
    Field(
        description="The candidate: a Python module defining ModelNew (CUDA built with load_inline), "
        "or a standalone CUDA C++ program with int main()."
    ),
]
# A harness usually sends only the candidate; the reference then comes from `profsvc mcp --reference`.
ReferenceCode = Annotated[
    str | None,
    Field(
        description="The reference Python module (Model, get_inputs, get_init_inputs). Omit when kernel_code "
        "holds them too, or when the server was started with a reference."
    ),
]
FileName = Annotated[
    str | None,
    Field(
        description="File name for kernel_code; .py is a Python problem, .cu a CUDA program. Default: "
        "program.cu when kernel_code has int main() and no Python import, else candidate.py. "
        "Diagnostics name this file."
    ),
]
NvccFlags = Annotated[
    list[str] | None,
    Field(description="Extra nvcc flags for a CUDA program (-O3, -DNAME=VALUE, --use_fast_math, -maxrregcount=N)."),
]
Trials = Annotated[
    int, Field(ge=0, description="Correctness trials on fresh random inputs (0: the server's default, 5).")
]
KernelRegex = Annotated[str, Field(description="Profile only kernels whose name matches this regular expression.")]
LaunchCount = Annotated[int, Field(ge=0, description="Profile at most this many matching launches (0: no limit).")]
MetricSet = Annotated[
    str, Field(description="ncu metric set: basic, default, full or timing (empty: the server's default).")
]
# The contract's Precision and ClockControl choices, spelled out for the tool's JSON schema (a test holds them equal).
PrecisionMode = Annotated[
    Literal["fp32", "fp16", "bf16"],
    Field(
        description="What both models run in: fp32 (the problem's own dtypes), or fp16 or bf16 (the inputs and "
        "the models' weights cast, tolerances atol = rtol = 1e-2 as KernelBench's)."
    ),
]
ClockControlChoice = Annotated[
    Literal["none", "base"],
    Field(
        description="How ncu sets the GPU clocks while it profiles: none (as they run) or base (locked to the "
        "GPU's base clocks, comparable between runs)."
    ),
]

PolicyOverrides = Annotated[
    dict[str, Literal["error", "warning", "info", "off"]] | None,
    Field(
        description="Static-check severities for this call, rule id to error/warning/info/off, e.g. "
        '{"torch_fallback": "error"} to fail PyTorch operations left next to your own kernels (by default they are '
        "warnings; a forward that runs no kernel of its own is an error). Applied on top of the server's policy."
    ),
]

_PYTHON_IMPORT = re.compile(r"^\s*(import|from)\s+\w", re.MULTILINE)
_C_MAIN = re.compile(r"\bint\s+main\s*\(")
# A kernel's own failure (its traceback, a compiler log) helps the model; past this it only costs context.
MAX_DETAIL_LINES = 40


class ToolFailure(BaseModel):
    """Structured content of a tool error."""

    reason: str
    message: str
    request_id: str = ""


def default_file_name(kernel_code: str) -> str:
    """The name a candidate gets when the caller gives none: the server reads .py and .cu differently."""
    if _C_MAIN.search(kernel_code) and not _PYTHON_IMPORT.search(kernel_code):
        return "program.cu"
    return "candidate.py"


def _tail(text: str, lines: int = MAX_DETAIL_LINES) -> list[str]:
    kept = text.rstrip().splitlines()
    return ([f"... ({len(kept) - lines} earlier lines left out)"] if len(kept) > lines else []) + kept[-lines:]


def compile_text(result: CompileResult, tool: str = "compile_kernel") -> str:
    """`compile_kernel PASSED/FAILED: ...` and the diagnostics as file:line:col lines."""
    if result.ok:
        cached = ", cached" if result.units and all(u.cached for u in result.units) else ""
        lines = [f"{tool} PASSED: kernel compiled without errors ({result.seconds:.1f} s{cached})."]
    else:
        count = sum(d.severity.value == "error" for d in result.diagnostics)
        lines = [f"{tool} FAILED: {count} error(s)." if count else f"{tool} FAILED: the build failed."]
    for d in result.diagnostics:
        where = f"{d.file}:{d.line}:{d.column}: " if d.file else ""
        lines.append(f"{where}{d.severity.value}: {d.message}")
    if not result.ok and not result.diagnostics and result.log:
        lines.extend(_tail(result.log))
    return "\n".join(lines)


def correctness_text(result: CorrectnessResult) -> str:
    """`run_correctness PASSED/FAILED: ...`, error figures, the first mismatch, or why it could not run."""
    if result.error.kind:
        lines = [f"run_correctness FAILED ({result.error.kind}): {result.error.message}"]
        if not result.compile.ok and result.compile.diagnostics:
            lines.extend(compile_text(result.compile).splitlines()[1:])
        if result.error.detail:
            lines.extend(_tail(result.error.detail))
        return "\n".join(lines)
    verdict = "PASSED" if result.ok else "FAILED"
    lines = [f"run_correctness {verdict}: ({result.passed} / {result.trials}) trials matched the reference."]
    if result.precision is not Precision.UNSPECIFIED:
        lines[0] += f" Precision: {result.precision.value}."
    lines.extend(result.report_text.splitlines()[1:])
    return "\n".join(lines)


def static_check_text(result: StaticCheckResult) -> str:
    """`static_check PASSED/FAILED: ...` (with the policy when it is not the default) over the server's report,
    a line per finding."""
    errors_found = sum(f.severity == "error" for f in result.findings)
    warnings = len(result.findings) - errors_found
    if not result.findings:
        head = "static_check PASSED: no violations or warnings detected."
    else:
        head = f"static_check {'PASSED' if result.ok else 'FAILED'}: {errors_found} error(s), {warnings} warning(s)."
    if not result.policy.is_default:
        head += f" Policy: {result.policy.label()}."
    return f"{head}\n{result.report_text.rstrip()}"


def profile_text(result: ProfileResult, tool: str) -> str:
    """A one-line verdict over the server's own report text (which says why a failed job failed)."""
    if result.ok:
        head = f"{tool} PASSED: {len(result.kernels)} kernel launch(es) profiled."
    else:
        head = f"{tool} FAILED ({result.error.kind})."
    return f"{head}\n{result.report_text.rstrip()}"


def evaluate_text(result: EvaluateResult) -> str:
    """A one-line verdict over the server's Evaluate report."""
    return f"submit_kernel {'PASSED' if result.ok else 'FAILED'}\n{result.report_text.rstrip()}"


def _answer(text: str, result: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )


def _failure(tool: str, error: errors.ProfsvcError | OSError) -> CallToolResult:
    if isinstance(error, errors.ProfsvcError):
        failure = ToolFailure(reason=error.reason.value, message=error.message, request_id=error.request_id)
    else:
        failure = ToolFailure(reason=errors.Reason.BAD_ARGUMENT.value, message=str(error))
    request = f" (request id {failure.request_id})" if failure.request_id else ""
    return CallToolResult(
        content=[TextContent(type="text", text=f"{tool} ERROR [{failure.reason}]: {failure.message}{request}")],
        structured_content=failure.model_dump(),
        is_error=True,
    )


def _tool(
    method: Callable[Concatenate[ProfsvcTools, P], CallToolResult],
) -> Callable[Concatenate[ProfsvcTools, P], CallToolResult]:
    """Turn a profsvc error (or an unreadable file) into the tool error the model reads.

    `functools.wraps` keeps the method's signature and docstring, which the SDK turns into the tool's schemas.
    """

    @functools.wraps(method)
    def call(self: ProfsvcTools, *args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return method(self, *args, **kwargs)
        except (errors.ProfsvcError, OSError) as error:
            return _failure(method.__name__, error)

    return call


class ProfsvcTools:
    """The tools, bound to one ProfilerClient (its gRPC channel is thread-safe: the SDK runs each call in a thread).

    `reference` is the reference module used when a call brings no reference_code; `policy` the static-check
    policy of calls that set no severities of their own.
    """

    def __init__(
        self, client: ProfilerClient, reference: SourceFile | None = None, policy: StaticPolicy | None = None
    ) -> None:
        self.client = client
        self.reference = reference
        self.policy = policy

    def call_policy(self, overrides: dict[str, str] | None) -> StaticPolicy | None:
        """The server's policy (`profsvc mcp --policy`) with a call's per-rule severities on top."""
        return with_overrides(self.policy, (overrides or {}).items())

    def source(
        self,
        kernel_code: str,
        reference_code: str | None,
        file_name: str | None,
        nvcc_flags: list[str] | None = None,
    ) -> KernelSource:
        """The KernelSource a call describes."""
        main = SourceFile(name=file_name or default_file_name(kernel_code), content=kernel_code.encode())
        source = KernelSource(main=main, nvcc_flags=list(nvcc_flags or []))
        if reference_code is not None:
            source.reference = SourceFile(name="reference.py", content=reference_code.encode())
        elif self.reference is not None and main.name.endswith(".py"):
            source.reference = self.reference
        return source

    @_tool
    def compile_kernel(
        self,
        kernel_code: KernelCode,
        reference_code: ReferenceCode = None,
        file_name: FileName = None,
        nvcc_flags: NvccFlags = None,
    ) -> Annotated[CallToolResult, CompileResult]:
        """Build the candidate's CUDA code (load_inline extensions, or nvcc for a .cu program) without running it.

        Answers PASSED, or FAILED with the compiler's errors as file:line:col lines in the candidate's own file.
        """
        result = self.client.compile(self.source(kernel_code, reference_code, file_name, nvcc_flags))
        return _answer(compile_text(result), result)

    @_tool
    def run_correctness(
        self,
        kernel_code: KernelCode,
        reference_code: ReferenceCode = None,
        file_name: FileName = None,
        trials: Trials = 0,
        precision: PrecisionMode = "fp32",
    ) -> Annotated[CallToolResult, CorrectnessResult]:
        """Run ModelNew against the reference Model on fresh random inputs and compare outputs (needs a GPU).

        Answers PASSED or FAILED with max/mean absolute and relative errors and the first mismatch.
        """
        source = self.source(kernel_code, reference_code, file_name)
        result = self.client.check_correctness(source, trials=trials, precision=precision)
        return _answer(correctness_text(result), result)

    @_tool
    def profile_kernel(
        self,
        kernel_code: KernelCode,
        reference_code: ReferenceCode = None,
        file_name: FileName = None,
        kernel_regex: KernelRegex = "",
        launch_count: LaunchCount = 0,
        metric_set: MetricSet = "",
        nvcc_flags: NvccFlags = None,
        clock_control: ClockControlChoice = "none",
    ) -> Annotated[CallToolResult, ProfileResult]:
        """Profile the candidate's kernels under Nsight Compute on the GPU (needs a GPU).

        Answers with duration, speed of light, DRAM and L2 traffic, occupancy, coalescing, warp stall reasons,
        Nsight Compute's own rule results and ranked optimization hints backed by the figures.
        """
        result = self.client.profile(
            self.source(kernel_code, reference_code, file_name, nvcc_flags),
            kernel_filter=KernelFilter(name_regex=kernel_regex, launch_count=launch_count),
            metric_set=metric_set,
            clock_control=clock_control,
            skip_charts=True,  # an agent's answer is text: no tool downloads a chart
        )
        return _answer(profile_text(result, "profile_kernel"), result)

    @_tool
    def static_check(
        self,
        kernel_code: KernelCode,
        reference_code: ReferenceCode = None,
        file_name: FileName = None,
        policy: PolicyOverrides = None,
    ) -> Annotated[CallToolResult, StaticCheckResult]:
        """Check the candidate's source for the known ways of gaming a kernel benchmark; nothing runs.

        Flags a forward that runs no kernel of its own, PyTorch fallbacks, cached results, monkeypatched timers,
        side streams, precision downcasts and more, each as a file:line:col finding.
        """
        source = self.source(kernel_code, reference_code, file_name)
        result = self.client.static_check(source, policy=self.call_policy(policy))
        return _answer(static_check_text(result), result)

    @_tool
    def submit_kernel(
        self,
        kernel_code: KernelCode,
        reference_code: ReferenceCode = None,
        file_name: FileName = None,
        trials: Trials = 0,
        skip_profile: Annotated[bool, Field(description="Skip the ncu profile (and the SOL score).")] = False,
        policy: PolicyOverrides = None,
        precision: PrecisionMode = "fp32",
        clock_control: ClockControlChoice = "none",
    ) -> Annotated[CallToolResult, EvaluateResult]:
        """Submit the final candidate: static check, compile, correctness, timing against the reference, memory,
        kernel launches and fusion, speed-of-light score and a short profile (needs a GPU)."""
        result = self.client.evaluate(
            self.source(kernel_code, reference_code, file_name),
            trials=trials,
            skip_profile=skip_profile,
            policy=self.call_policy(policy),
            precision=precision,
            clock_control=clock_control,
            skip_charts=True,
        )
        return _answer(evaluate_text(result), result)

    @_tool
    def analyze_report(
        self,
        report_path: Annotated[
            str | None, Field(description="Path of a .ncu-rep file on the machine this MCP server runs on.")
        ] = None,
        report_base64: Annotated[str | None, Field(description="The .ncu-rep file's bytes, base64-encoded.")] = None,
        kernel_regex: KernelRegex = "",
    ) -> Annotated[CallToolResult, ProfileResult]:
        """Read an existing Nsight Compute report (.ncu-rep) into the same figures, stalls and hints as
        profile_kernel; no GPU needed. Give exactly one of report_path and report_base64."""
        if (report_path is None) == (report_base64 is None):
            raise errors.InvalidRequest("give exactly one of report_path and report_base64")
        report: bytes | Path
        if report_path is not None:
            report = Path(report_path).expanduser()
        else:
            try:
                # Line breaks are allowed, as `base64` writes them; anything else outside the alphabet is not.
                report = base64.b64decode("".join((report_base64 or "").split()), validate=True)
            except binascii.Error as error:
                raise errors.InvalidRequest(f"report_base64 is not valid base64: {error}") from None
        result = self.client.analyze(report, kernel_filter=KernelFilter(name_regex=kernel_regex), skip_charts=True)
        return _answer(profile_text(result, "analyze_report"), result)


def build_server(
    client: ProfilerClient, *, reference: SourceFile | None = None, policy: StaticPolicy | None = None
) -> MCPServer:
    """An MCP server with the six tools over `client`."""
    try:
        version = metadata.version("profsvc-client")
    except metadata.PackageNotFoundError:
        version = ""
    server: MCPServer = MCPServer("profsvc", instructions=INSTRUCTIONS, version=version, log_level="WARNING")
    tools = ProfsvcTools(client, reference, policy)
    reads_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    runs_code = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    for tool, hints in (
        (tools.compile_kernel, runs_code),
        (tools.run_correctness, runs_code),
        (tools.profile_kernel, runs_code),
        (tools.static_check, reads_only),
        (tools.submit_kernel, runs_code),
        (tools.analyze_report, reads_only),
    ):
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), annotations=hints)
    return server


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_bindable(host: str, port: int) -> None:
    """Fail with one line now if host:port cannot be bound: uvicorn says so only after its start-up line."""
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None


def serve_mcp(
    client_factory: ClientFactory,
    transport: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    reference: Path | None = None,
    policy: Path | None = None,
    insecure: bool = False,
) -> None:
    """Serve the tools over stdio or streamable HTTP (at /mcp) until the client or a signal ends it.

    `client_factory` yields the ProfilerClient to use for the server's lifetime (remote or embedded).
    The HTTP transport has no authentication of its own, and its tools run code on the GPU server with
    this process's token: a non-loopback `host` needs `insecure=True`. `policy` is a static-check policy file
    for calls that set no severities of their own.
    """
    if transport not in ("stdio", "http"):
        raise errors.InvalidRequest(f"unknown MCP transport {transport!r} (stdio or http)", errors.Reason.BAD_ARGUMENT)
    if transport == "http" and not _is_loopback(host) and not insecure:
        raise errors.InvalidRequest(
            f"the MCP HTTP transport has no authentication: binding {host} needs --insecure "
            "(or keep 127.0.0.1 and tunnel)",
            errors.Reason.BAD_ARGUMENT,
        )
    if transport == "http":
        _check_bindable(host, port)
    reference_file = SourceFile(name=reference.name, content=reference.read_bytes()) if reference else None
    static_policy = read_policy_file(policy) if policy else None
    with client_factory() as client:
        server = build_server(client, reference=reference_file, policy=static_policy)
        if transport == "stdio":
            server.run("stdio")
        else:
            # stdout stays quiet for stdio; for HTTP one line says where to connect.
            print(f"profsvc mcp: streamable HTTP on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            server.run("streamable-http", host=host, port=port)


__all__ = ["ProfsvcTools", "ToolFailure", "build_server", "default_file_name", "serve_mcp"]
