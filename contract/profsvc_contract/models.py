"""Typed results: pydantic models that mirror the messages of profiler.proto.

Field names and nesting are the proto's, so `profsvc_contract.convert` moves data
between the two generically; enums use the proto value names without their
prefix, in lower case ("STAGE_QUEUED" is Stage.QUEUED = "queued"). The repeat
statistics (RepeatResult, KernelStats, FigureStats) have no message: the client
computes them from the results of several calls.
"""

from __future__ import annotations

import enum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceKind(enum.StrEnum):
    """How the server reads the main source file."""

    UNSPECIFIED = "unspecified"
    PYTHON_PROBLEM = "python_problem"
    CUDA_PROGRAM = "cuda_program"
    PYTHON_PROGRAM = "python_program"


class Target(enum.StrEnum):
    """Which model of a Python problem runs."""

    UNSPECIFIED = "unspecified"
    CANDIDATE = "candidate"
    REFERENCE = "reference"


class _Choice(enum.StrEnum):
    """An option whose `unspecified` value (the wire's zero) stands for the server's default."""

    @classmethod
    def choices(cls) -> tuple[str, ...]:
        """The values a caller may name, in the proto's order."""
        return tuple(member.value for member in cls if member.value != "unspecified")

    @classmethod
    def named(cls, value: str, what: str) -> Self:
        """The member `value` names (`unspecified` too); InvalidRequest listing the choices for anything else."""
        if value != "unspecified" and value not in cls.choices():
            # Imported here: the errors bring grpc, which a process that only reads results does without.
            from profsvc_contract.errors import InvalidRequest, Reason

            raise InvalidRequest(f"{what} {value!r} is not one of {', '.join(cls.choices())}", Reason.BAD_ARGUMENT)
        return cls(value)


class Precision(_Choice):
    """The precision a Python problem's correctness check, timing and evaluation run in (KernelBench's modes)."""

    UNSPECIFIED = "unspecified"
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"


class ClockControl(_Choice):
    """How ncu sets the GPU's clocks while it profiles (its --clock-control)."""

    UNSPECIFIED = "unspecified"
    NONE = "none"
    BASE = "base"


# fp32 casts nothing: a request that names no precision runs the problem's own dtypes.
DEFAULT_PRECISION = Precision.FP32
# Clocks left as they are by default: agents compare their kernels against what they run at in the real world
# (boost clocks), not at the base clocks ncu would lock them to.
DEFAULT_CLOCK_CONTROL = ClockControl.NONE


class Stage(enum.StrEnum):
    """Stage of a job, in order."""

    UNSPECIFIED = "unspecified"
    QUEUED = "queued"
    COMPILING = "compiling"
    RUNNING = "running"
    PROFILING = "profiling"
    PARSING = "parsing"
    DONE = "done"


class Severity(enum.StrEnum):
    """How much a compiler diagnostic or a static-check finding matters (the one severity of profsvc)."""

    UNSPECIFIED = "unspecified"
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"
    INFO = "info"


class SourceFile(_Model):
    """One uploaded file."""

    name: str = ""
    content: bytes = b""


class KernelSource(_Model):
    """What to build and run."""

    kind: SourceKind = SourceKind.UNSPECIFIED
    main: SourceFile = Field(default_factory=SourceFile)
    reference: SourceFile = Field(default_factory=SourceFile)
    nvcc_flags: list[str] = Field(default_factory=list)
    target: Target = Target.UNSPECIFIED
    args: list[str] = Field(default_factory=list)


class KernelFilter(_Model):
    """Which kernels to profile."""

    nvtx_include: list[str] = Field(default_factory=list)
    name_regex: str = ""
    launch_count: int = 0
    launch_skip: int = 0


class GpuInfo(_Model):
    """One GPU the server can profile on."""

    index: int = 0
    name: str = ""
    compute_capability: str = ""
    memory_bytes: int = 0


class MetricSet(_Model):
    """A named collection of ncu sections."""

    name: str = ""
    description: str = ""


class FigureInfo(_Model):
    """One figure of the server's catalog."""

    name: str = ""
    unit: str = ""
    label: str = ""


class Capabilities(_Model):
    """What a server offers (GetCapabilitiesResponse)."""

    server_version: str = ""
    gpus: list[GpuInfo] = Field(default_factory=list)
    driver_version: str = ""
    ncu_version: str = ""
    metric_sets: list[MetricSet] = Field(default_factory=list)
    profiling_available: bool = False
    unavailable_reason: str = ""
    nvcc_version: str = ""
    isolation: str = ""
    figures: list[FigureInfo] = Field(default_factory=list)
    host: str = ""


class Diagnostic(_Model):
    """One compiler message, located in the user's own file where possible."""

    file: str = ""
    line: int = 0
    column: int = 0
    severity: Severity = Severity.UNSPECIFIED
    message: str = ""


class BuiltUnit(_Model):
    """One built extension or program, and the build route it took (with why a faster one was not)."""

    name: str = ""
    cache_key: str = ""
    cached: bool = False
    seconds: float = 0.0
    route: str = ""
    route_reason: str = ""
    route_detail: str = ""
    # Tried and failed (the compile's diagnostics say why): nothing of it is in the cache.
    failed: bool = False


class CompileResult(_Model):
    """Outcome of a build."""

    ok: bool = False
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    units: list[BuiltUnit] = Field(default_factory=list)
    # Seconds by stage: where the call's time went.
    timings: dict[str, float] = Field(default_factory=dict)


class Progress(_Model):
    """A progress event of a running job."""

    stage: Stage = Stage.UNSPECIFIED
    message: str = ""
    pass_: int = Field(default=0, alias="pass")
    passes: int = 0
    kernel_index: int = 0
    elapsed_seconds: float = 0.0
    queue_position: int = 0

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class Dim3(_Model):
    """A grid or block shape."""

    x: int = 0
    y: int = 0
    z: int = 0


class FigureValue(_Model):
    """One figure: value (None when not collected) and unit."""

    value: float | None = None
    unit: str = ""


class StallReason(_Model):
    """One warp stall reason: share of all stall cycles and cycles per issued instruction."""

    reason: str = ""
    share_pct: float = 0.0
    cycles_per_issue: float = 0.0


class NcuRuleResult(_Model):
    """One of Nsight Compute's own guided-analysis results."""

    rule_id: str = ""
    section: str = ""
    title: str = ""
    message: str = ""
    type: str = ""
    estimated_speedup_pct: float | None = None
    speedup_type: str = ""


# Each `Roofline.bound` in words, and the unit whose throughput `bound_pct` is.
BOUND_LABELS = {
    "compute": ("compute-bound", "SM"),
    "dram": ("DRAM-bound", "DRAM"),
    "l2": ("on-chip-memory-bound", "L2"),
    "l1": ("on-chip-memory-bound", "L1/shared memory"),
    "latency": ("latency-bound", "the busiest unit"),
}


class Roofline(_Model):
    """Roofline placement of a kernel for one precision, and what bounds it."""

    precision: str = ""
    achieved_flop_per_s: float | None = None
    peak_flop_per_s: float | None = None
    dram_byte_per_s: float | None = None
    peak_dram_byte_per_s: float | None = None
    arithmetic_intensity: float | None = None
    ridge_point: float | None = None
    bound: str = ""
    roof_pct: float | None = None
    l2_arithmetic_intensity: float | None = None
    l1_arithmetic_intensity: float | None = None
    bound_pct: float | None = None
    note: str = ""

    @property
    def bound_label(self) -> str:
        """The bound in words with its unit's throughput ("on-chip-memory-bound (L2 at 87.9 % of peak)")."""
        if not self.bound:
            return ""
        label, unit = BOUND_LABELS.get(self.bound, (f"{self.bound}-bound", self.bound))
        return label if self.bound_pct is None else f"{label} ({unit} at {self.bound_pct:.1f} % of peak)"


class SourceHotspot(_Model):
    """One CUDA source line that stands out in the stall samples."""

    file: str = ""
    line: int = 0
    text: str = ""
    samples: int = 0
    sample_share_pct: float = 0.0
    top_stall: str = ""
    top_stall_share_pct: float = 0.0
    global_memory_instructions: float | None = None
    excess_sectors: float | None = None


class Evidence(_Model):
    """One figure a hint quotes."""

    figure: str = ""
    value: float | None = None
    unit: str = ""


class Hint(_Model):
    """One optimization hint, backed by the figures that triggered it."""

    rule_id: str = ""
    origin: str = ""
    severity: str = ""
    title: str = ""
    message: str = ""
    advice: str = ""
    estimated_speedup_pct: float = 0.0
    evidence: list[Evidence] = Field(default_factory=list)
    source_lines: list[str] = Field(default_factory=list)
    docs: str = ""


class NvtxRanges(_Model):
    """The NVTX ranges of one domain that a launch ran under ("" is the default domain)."""

    domain: str = ""
    push_pop: list[str] = Field(default_factory=list)
    start_end: list[str] = Field(default_factory=list)


class Inconsistency(_Model):
    """Figures of one kernel that contradict each other: hints that read them are not drawn."""

    check: str = ""
    message: str = ""
    figures: list[str] = Field(default_factory=list)


class KernelResult(_Model):
    """Everything measured for one profiled kernel launch."""

    name: str = ""
    demangled_name: str = ""
    grid: Dim3 = Field(default_factory=Dim3)
    block: Dim3 = Field(default_factory=Dim3)
    figures: dict[str, FigureValue] = Field(default_factory=dict)
    stalls: list[StallReason] = Field(default_factory=list)
    ncu_rules: list[NcuRuleResult] = Field(default_factory=list)
    nvtx_range: str = ""
    launch_index: int = 0
    roofline: Roofline = Field(default_factory=Roofline)
    hotspots: list[SourceHotspot] = Field(default_factory=list)
    occupancy_limiter: str = ""
    hints: list[Hint] = Field(default_factory=list)
    inconsistencies: list[Inconsistency] = Field(default_factory=list)
    nvtx: list[NvtxRanges] = Field(default_factory=list)
    # The ncu metrics the request named, in ncu's base units, and its derived metrics (no unit).
    metrics: dict[str, FigureValue] = Field(default_factory=dict)

    def value(self, figure: str) -> float | None:
        """The value of a catalog figure, None when absent."""
        found = self.figures.get(figure)
        return found.value if found else None


class DeviceInfo(_Model):
    """The GPU a report was captured on."""

    name: str = ""
    compute_capability: str = ""
    sm_count: int = 0


class ArtifactRef(_Model):
    """A downloadable file a result names."""

    id: str = ""
    name: str = ""
    content_type: str = ""
    size: int = 0


class NcuRun(_Model):
    """How ncu ran."""

    version: str = ""
    command: str = ""
    passes: list[int] = Field(default_factory=list)
    seconds: float = 0.0
    # The metric set ncu collected (the server's default named where the request named none).
    metric_set: str = ""
    clock_control: ClockControl = ClockControl.UNSPECIFIED


class JobError(_Model):
    """Why a job produced no figures (a user error, reported as a result)."""

    kind: str = ""
    message: str = ""
    stage: Stage = Stage.UNSPECIFIED
    kernel: str = ""
    detail: str = ""


class KernelShare(_Model):
    """One kernel's share of a call that launched several."""

    name: str = ""
    launches: int = 0
    duration_ns: float = 0.0
    share_pct: float = 0.0


class Aggregate(_Model):
    """Totals over all profiled launches."""

    launches: int = 0
    total_duration_ns: float = 0.0
    kernels: list[KernelShare] = Field(default_factory=list)


class DeltaRow(_Model):
    """One figure compared with the session's previous result."""

    kernel: str = ""
    figure: str = ""
    before: float | None = None
    after: float | None = None
    unit: str = ""
    change_pct: float | None = None
    verdict: str = ""


class ServerInfo(_Model):
    """The server that answered a call: provenance for results kept apart from it."""

    version: str = ""
    host: str = ""
    driver_version: str = ""


class ProfileResult(_Model):
    """Result of Profile and Analyze."""

    ok: bool = False
    job_id: str = ""
    device: DeviceInfo = Field(default_factory=DeviceInfo)
    kernels: list[KernelResult] = Field(default_factory=list)
    compile: CompileResult = Field(default_factory=CompileResult)
    artifacts: list[ArtifactRef] = Field(default_factory=list)
    ncu: NcuRun = Field(default_factory=NcuRun)
    error: JobError = Field(default_factory=JobError)
    report_text: str = ""
    warnings: list[str] = Field(default_factory=list)
    aggregate: Aggregate = Field(default_factory=Aggregate)
    delta: list[DeltaRow] = Field(default_factory=list)
    session_id: str = ""
    target: str = ""
    # Seconds by stage: where the call's time went.
    timings: dict[str, float] = Field(default_factory=dict)
    # The report in Markdown (the server renders it).
    report_markdown: str = ""
    server: ServerInfo = Field(default_factory=ServerInfo)


class FigureStats(_Model):
    """One figure of one kernel launch over the repeats of a request (the client computes it: no message)."""

    unit: str = ""
    # Each repeat's value, in repeat order (None where that repeat has none).
    values: list[float | None] = Field(default_factory=list)
    # The repeats with a value, and their median, least and greatest.
    n: int = 0
    median: float | None = None
    min: float | None = None
    max: float | None = None
    # (max - min) / |median| in %: 0 where every value is the same, None where the median is 0 and they differ.
    spread_pct: float | None = None


class KernelStats(_Model):
    """One kernel launch across the repeats, matched by its name and its place among that name's launches."""

    name: str = ""
    # Which launch of this name it is (0: the first), in each repeat's launch order.
    occurrence: int = 0
    # Its launch_index in the first repeat that has it.
    launch_index: int = 0
    # The repeats it ran in.
    repeats: int = 0
    # Catalog figures and the request's metrics (as a KernelResult's `figures` and `metrics`), by name.
    figures: dict[str, FigureStats] = Field(default_factory=dict)
    metrics: dict[str, FigureStats] = Field(default_factory=dict)


class RepeatResult(_Model):
    """N profiles of one request, each a full ncu run, and every figure's statistics over them.

    The client makes it from the N ProfileResults (`runs`), so it works against any server.
    """

    ok: bool = False
    repeats: int = 0
    kernels: list[KernelStats] = Field(default_factory=list)
    runs: list[ProfileResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class StaticFinding(_Model):
    """One static-check finding."""

    rule_id: str = ""
    severity: str = ""
    line: int = 0
    column: int = 0
    message: str = ""


class RuleSeverity(_Model):
    """One rule's severity under a static-check policy: error, warning, info or off."""

    rule_id: str = ""
    severity: str = ""


class StaticPolicy(_Model):
    """A static-check policy: a name and the rules whose severity differs from the server's rule table."""

    name: str = ""
    overrides: list[RuleSeverity] = Field(default_factory=list)

    @property
    def is_default(self) -> bool:
        """Whether this is the server's default policy, unchanged."""
        return self.name in ("", "default") and not self.overrides

    def label(self) -> str:
        """How a result names its policy: `default`, or `strict (torch_fallback=error, cuda_vendor_library=off)`."""
        name = self.name or "default"
        if not self.overrides:
            return name
        return f"{name} ({', '.join(f'{o.rule_id}={o.severity}' for o in self.overrides)})"


class StaticCheckResult(_Model):
    """Outcome of a static check (ok: no finding of severity error under the policy that applied)."""

    ok: bool = False
    findings: list[StaticFinding] = Field(default_factory=list)
    policy: StaticPolicy = Field(default_factory=StaticPolicy)
    # The report as the CLI and the agent tools show it (the server renders it).
    report_text: str = ""


class Tolerance(_Model):
    """Tolerances applied to one output dtype."""

    dtype: str = ""
    atol: float = 0.0
    rtol: float = 0.0


class TrialResult(_Model):
    """One correctness trial."""

    index: int = 0
    ok: bool = False
    message: str = ""
    input_shapes: list[str] = Field(default_factory=list)
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    max_rel_error: float | None = None
    first_mismatch: str = ""


class CorrectnessResult(_Model):
    """Outcome of the correctness check."""

    ok: bool = False
    trials: int = 0
    passed: int = 0
    trial_results: list[TrialResult] = Field(default_factory=list)
    tolerances: list[Tolerance] = Field(default_factory=list)
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""
    error: JobError = Field(default_factory=JobError)
    compile: CompileResult = Field(default_factory=CompileResult)
    # Seconds by stage: where the call's time went.
    timings: dict[str, float] = Field(default_factory=dict)
    # The report as the CLI and the agent tools show it (the server renders it).
    report_text: str = ""
    precision: Precision = Precision.UNSPECIFIED


class TimingStats(_Model):
    """Summary statistics of per-call times, in microseconds."""

    median_us: float = 0.0
    mean_us: float = 0.0
    std_us: float = 0.0
    min_us: float = 0.0
    p10_us: float = 0.0
    p90_us: float = 0.0
    n: int = 0
    median_ci_low_us: float = 0.0
    median_ci_high_us: float = 0.0


class LaunchRecord(_Model):
    """One kernel launch of one call, from CUPTI's kernel records."""

    name: str = ""
    device_time_us: float = 0.0


class ModelTiming(_Model):
    """How one model was timed."""

    events: TimingStats = Field(default_factory=TimingStats)
    wall: TimingStats = Field(default_factory=TimingStats)
    kernels: TimingStats = Field(default_factory=TimingStats)
    launches_per_call: int = 0
    launch_records: list[LaunchRecord] = Field(default_factory=list)
    peak_memory_bytes: int = 0


class BenchmarkResult(_Model):
    """Outcome of a benchmark."""

    ok: bool = False
    candidate: ModelTiming = Field(default_factory=ModelTiming)
    reference: ModelTiming = Field(default_factory=ModelTiming)
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    speedup_basis: str = ""
    method: str = ""
    clocks_mhz: dict[str, float] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    memory_ratio: float | None = None
    fusion_ratio: float | None = None
    error: JobError = Field(default_factory=JobError)
    compile: CompileResult = Field(default_factory=CompileResult)
    # The flags only gaming explains: any of them fails an evaluation.
    decisive_flags: list[str] = Field(default_factory=list)
    # Seconds by stage: where the call's time went.
    timings: dict[str, float] = Field(default_factory=dict)
    # The report as the CLI and the agent tools show it (the server renders it).
    report_text: str = ""
    precision: Precision = Precision.UNSPECIFIED


class EvaluateResult(_Model):
    """Outcome of Evaluate: everything a submission needs."""

    ok: bool = False
    static_check: StaticCheckResult = Field(default_factory=StaticCheckResult)
    correctness: CorrectnessResult = Field(default_factory=CorrectnessResult)
    benchmark: BenchmarkResult = Field(default_factory=BenchmarkResult)
    profile: ProfileResult = Field(default_factory=ProfileResult)
    sol_pct: float | None = None
    sol_definition: str = ""
    report_text: str = ""
    # Seconds by stage: where the call's time went.
    timings: dict[str, float] = Field(default_factory=dict)
    # The report in Markdown (the server renders it).
    report_markdown: str = ""
    precision: Precision = Precision.UNSPECIFIED
