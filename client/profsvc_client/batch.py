"""Batch collection: many problems in, one table out, resumable.

    profsvc batch problems/ --out results.parquet --concurrency 8 --server h1:50051,h2:50051
    profsvc batch problems/ --out results.parquet --cluster tcp://scheduler:8786

INPUT is a directory of problem files (*.py Python problems, *.cu CUDA programs,
*.ncu-rep reports to analyze; searched recursively) or a JSONL manifest, one object per line:

    {"file": "level1/matmul.py", "kernel": "gemm", "metric_set": "full", "tags": {"level": "1"}}

(`file` relative to the manifest; the others optional, defaulting to the
command's --kernel, --metric-set, --task and --sweep; `"sweep": {"dim": [1024, 4096]}` sets a Python
problem's module constants to each point of the grid, profsvc_client.sweep; --clock-control applies to every
profile). A problem's task is `profile`
(needs a GPU), `lint` (the static check) or `analyze` (a .ncu-rep; both CPU only).
Problems run through the server by a pool of threads sharing one ProfilerClient
(a gRPC channel is thread-safe; with several servers its round_robin policy
spreads the calls), or, with --cluster, as one Dask task each
(profsvc_client.cluster_batch).

With --repeat N each profile runs N times, each repeat a problem of its own (its `repeat` 0..N-1); each grid
point of a sweep is a problem of its own too (its `params`).

Each finished problem is appended, flushed and synced, as one line of
`<out>.partial.jsonl`. A rerun skips the problems that file already holds
(same relative path, file content, metric set, kernel filter, clock control, grid point and repeat), except those
that failed for the server's sake (unreachable, queue full, no GPU, ...), and
then writes the parquet from it: one row per profiled kernel launch, a failed
problem as one row with its status and error. A swept constant's column `param_NAME` (typed by its values)
follows the fixed columns `COLUMNS`; figures are float64 columns (their unit in the column's parquet metadata),
in name order after them: one for every figure of the server's catalog, whatever the
results (a table of failures has the same columns as one of successes), and the
parquet's metadata holds its schema version.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from profsvc_client.client import ProfilerClient
from profsvc_client.sweep import Sweep, check_constants, grid, manifest_sweep, override_constants
from profsvc_contract import errors
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    Capabilities,
    ClockControl,
    FigureInfo,
    KernelFilter,
    KernelSource,
    ProfileResult,
    SourceFile,
    StaticCheckResult,
)

if TYPE_CHECKING:
    import pandas
    import pyarrow

CHECKPOINT_SUFFIX = ".partial.jsonl"
REPORT_SUFFIX = ".ncu-rep"
PROBLEM_SUFFIXES = (".py", ".cu")
# What a problem asks for: a profile on a GPU, or CPU-only work (the static check, reading a report).
TASKS = ("profile", "lint", "analyze")
GPU_TASKS = frozenset({"profile"})
# The fixed columns, in order; figure columns follow in name order. `worker`: the Dask worker that ran the
# problem ('' without --cluster); `findings`: the static check's findings as JSON ('[]' for other tasks);
# `target`: what ran (a problem's "candidate" or "reference", or "program"); `nvtx`: the NVTX ranges the
# launch ran under, as JSON (a list of {domain, push_pop, start_end}); `params`: the grid point of a sweep, as
# JSON ('{}' unswept); `repeat`: which of --repeat N profiles of the problem it is (0..N-1); `metric_set`: the set
# ncu collected (the server's default by name), as asked where ncu did not run; `server_version`, `host`: the
# server that answered; `driver_version`: the NVIDIA driver a profile ran under ('' for a report analyzed, which
# does not record it); `clock_control`: how ncu set the clocks, as the result states it ('' where no ncu ran).
COLUMNS = (
    "problem",
    "params",
    "repeat",
    "task",
    "target",
    "kernel",
    "launch_index",
    "nvtx",
    "status",
    "error",
    "findings",
    "tags",
    "metric_set",
    "kernel_regex",
    "clock_control",
    "worker",
    "wall_seconds",
    "compile_seconds",
    "ncu_seconds",
    "device",
    "compute_capability",
    "ncu_version",
    "server_version",
    "driver_version",
    "host",
)
# What a checkpoint line written before a column existed reads as.
COLUMN_DEFAULTS = {
    "params": {},
    "repeat": 0,
    "task": "profile",
    "worker": "",
    "findings": [],
    "target": "",
    "device": "",
    "compute_capability": "",
    "ncu_version": "",
    "server_version": "",
    "driver_version": "",
    "host": "",
    "clock_control": "",
}
# The parquet's schema version (its metadata key PARQUET_SCHEMA_KEY): raised when a column is renamed, removed or
# changes meaning.
PARQUET_SCHEMA_VERSION = "2"
PARQUET_SCHEMA_KEY = b"profsvc_schema_version"
FLOAT_COLUMNS = ("wall_seconds", "compile_seconds", "ncu_seconds")
INT_COLUMNS = ("repeat", "launch_index")
# A swept constant's column: its name after this prefix.
PARAM_PREFIX = "param_"
# Failures that say nothing about the problem itself: a rerun tries these problems again.
RETRIED_ON_RERUN = frozenset(
    {
        errors.Reason.UNAVAILABLE,
        errors.Reason.QUEUE_FULL,
        errors.Reason.UNAUTHENTICATED,
        errors.Reason.NO_GPU,
        errors.Reason.NO_NCU,
        errors.Reason.NO_NVCC,
        errors.Reason.NO_TORCH,
        errors.Reason.INTERNAL,
        # A Dask worker without the service, or one the problem's task outlived too often (cluster_batch).
        "NO_SERVICE",
        "KILLED_WORKER",
    }
)
READ_ERROR = "READ_ERROR"
STATIC_CHECK_FAILED = "static_check_failed"


@dataclass(frozen=True)
class Problem:
    """One thing to do: a file, its task, with its kernel filter, metric set and tags."""

    name: str
    path: Path
    digest: str
    kernel_regex: str = ""
    metric_set: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    task: str = "profile"
    # ncu metrics to report besides the catalog's, and derived ones (NAME=FORMULA): a column each.
    metrics: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()
    # A sweep's grid point: module constants and the values the file is profiled with ({}: as written).
    params: Mapping[str, Any] = field(default_factory=dict)
    # Which of --repeat N profiles of the problem this is.
    repeat: int = 0
    # How ncu sets the clocks for a profile.
    clock_control: ClockControl = DEFAULT_CLOCK_CONTROL

    @property
    def key(self) -> str:
        """What makes a problem the same on a rerun: relative path, content, metric set, kernel filter, task,
        the metrics asked for, the clock control, the grid point and the repeat."""
        parts: list[Any] = [self.name, self.digest, self.metric_set, self.kernel_regex]
        if self.metrics or self.derived:
            parts += [*self.metrics, "|", *self.derived]
        # Only where not the default (clock control, a grid point, a repeat after the first): keys made before
        # these options existed still resume.
        if self.clock_control != DEFAULT_CLOCK_CONTROL:
            parts += ["clock_control", self.clock_control.value]
        if self.params:
            parts += ["params", dict(sorted(self.params.items()))]
        if self.repeat:
            parts += ["repeat", self.repeat]
        # A profile's key is the one checkpoints held before tasks existed: they still resume.
        identity = json.dumps(parts if self.task == "profile" else [*parts, self.task])
        return hashlib.sha256(identity.encode()).hexdigest()

    def content(self) -> bytes:
        """The file's bytes as its task gets them: a grid point's constants set to its values."""
        data = self.path.read_bytes()
        return override_constants(data, self.params, self.name) if self.params else data

    @property
    def needs_gpu(self) -> bool:
        """True for the tasks that run on a GPU."""
        return self.task in GPU_TASKS


ProblemResult = ProfileResult | StaticCheckResult
ProfileFn = Callable[[Problem], ProblemResult]


@dataclass(frozen=True)
class BatchSummary:
    """What a run did."""

    total: int
    resumed: int
    ok: int
    failed: Counter[str]
    seconds: float
    rows: int
    out: Path

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        failed = sum(self.failed.values())
        kinds = ", ".join(f"{kind} {count}" for kind, count in self.failed.most_common())
        return (
            f"profsvc batch: {self.total} problems ({self.resumed} from the checkpoint,"
            f" {self.total - self.resumed} run): {self.ok} ok, {failed} failed{f' ({kinds})' if kinds else ''}"
            f" in {self.seconds:.1f} s; wrote {self.rows} rows to {self.out}"
        )


def checkpoint_path(out: Path) -> Path:
    """The sidecar JSONL next to the output: `<out>.partial.jsonl`."""
    return out.with_name(out.name + CHECKPOINT_SUFFIX)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise errors.InvalidRequest(f"cannot read problem file {path}: {error.strerror}") from None


def _task_of(name: str, task: str) -> str:
    """A report is analyzed; a source file gets the task asked for (profile by default)."""
    return "analyze" if name.endswith(REPORT_SUFFIX) else task


def _from_directory(root: Path, kernel_regex: str, metric_set: str, task: str, sweep: Sweep) -> list[Problem]:
    files = sorted(
        path
        for path in root.rglob("*")
        if (path.suffix in PROBLEM_SUFFIXES or path.name.endswith(REPORT_SUFFIX))
        and path.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts)
    )
    named = [(path.relative_to(root).as_posix(), path) for path in files]
    for name, _ in named:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            # Its name could not go into the results table or a request: say so before any work.
            shown = name.encode("utf-8", "backslashreplace").decode()
            raise errors.InvalidRequest(f"{shown}: the file name is not UTF-8; rename it") from None
    return [
        swept
        for name, path in named
        for swept in _swept(
            Problem(name, path, _digest(path), kernel_regex, metric_set, task=_task_of(name, task)), sweep, name
        )
    ]


def _manifest_entry(
    manifest: Path, number: int, line: str, kernel_regex: str, metric_set: str, task: str, sweep: Sweep
) -> list[Problem]:
    """A manifest line's problem, one per point of its sweep (the entry's own, else the command's)."""
    where = f"{manifest.name}:{number}"
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as error:
        raise errors.InvalidRequest(f"{where}: not JSON: {error.msg}") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise errors.InvalidRequest(f'{where}: each line is an object with a "file" string')
    unknown = set(entry) - {"file", "kernel", "metric_set", "tags", "task", "sweep"}
    if unknown:
        raise errors.InvalidRequest(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    tags = entry.get("tags", {})
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise errors.InvalidRequest(f'{where}: "tags" must map strings to strings')
    for key in ("kernel", "metric_set", "task"):
        if not isinstance(entry.get(key, ""), str):
            raise errors.InvalidRequest(f'{where}: "{key}" must be a string')
    name = Path(entry["file"]).as_posix()
    chosen = entry.get("task", _task_of(name, task))
    if chosen not in TASKS:
        raise errors.InvalidRequest(f'{where}: "task" is one of {", ".join(TASKS)}, not {chosen!r}')
    if (chosen == "analyze") != name.endswith(REPORT_SUFFIX):
        raise errors.InvalidRequest(f"{where}: a {REPORT_SUFFIX} report is analyzed; analyze takes nothing else")
    path = manifest.parent / entry["file"]
    problem = Problem(
        name,
        path,
        _digest(path),
        entry.get("kernel", kernel_regex),
        entry.get("metric_set", metric_set),
        tags,
        chosen,
    )
    return _swept(problem, manifest_sweep(entry["sweep"], where) if "sweep" in entry else sweep, where)


def _swept(problem: Problem, sweep: Sweep, where: str) -> list[Problem]:
    """The problem at each point of the sweep, its constants checked first ([problem] without a sweep)."""
    if not sweep:
        return [problem]
    if problem.task != "profile" or not problem.name.endswith(".py"):
        raise errors.InvalidRequest(
            f"{where}: a sweep sets the constants of a Python file that is profiled; {problem.name} is not one"
        )
    check_constants(problem.path.read_bytes(), list(sweep), where)
    return [replace(problem, params=point) for point in grid(sweep)]


def _listed(source: Path, kernel_regex: str, metric_set: str, task: str, sweep: Sweep) -> list[Problem]:
    """The problems a directory or a JSONL manifest lists, with the command's defaults."""
    if source.is_dir():
        return _from_directory(source, kernel_regex, metric_set, task, sweep)
    if not source.is_file():
        raise errors.InvalidRequest(f"{source} is neither a directory of problems nor a JSONL manifest")
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise errors.InvalidRequest(f"{source}: a manifest is JSON lines in UTF-8") from None
    return [
        problem
        for number, line in enumerate(lines, start=1)
        if line.strip()
        for problem in _manifest_entry(source, number, line, kernel_regex, metric_set, task, sweep)
    ]


def discover(
    source: Path,
    *,
    kernel_regex: str = "",
    metric_set: str = "",
    task: str = "profile",
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
    sweep: Sweep | None = None,
    repeats: int = 1,
    clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
) -> list[Problem]:
    """The problems of a directory or a JSONL manifest; --kernel, --metric-set, --task and --sweep are the
    defaults.

    `task` applies to source files (profile or lint); a .ncu-rep is always analyzed. `metrics` and `derived`
    (--metric, --derived) apply to every profile and analyze, `clock_control` to every profile. `sweep`
    ({name: values}) sets the module constants of every Python file, each point of the grid a problem of its own;
    `repeats` (--repeat) makes each profile that many problems, `repeat` 0 to repeats - 1 (a static check or a
    report read is the same every time: done once).
    """
    if task not in ("profile", "lint"):
        raise errors.InvalidRequest(f"--task is profile or lint, not {task!r} (a .ncu-rep is analyzed by itself)")
    if repeats < 1:
        raise errors.InvalidRequest(f"--repeat must be at least 1, not {repeats}")
    clocks = ClockControl.named(clock_control, "--clock-control")
    problems = _listed(source, kernel_regex, metric_set, task, sweep or {})
    if not problems:
        raise errors.InvalidRequest(f"no problems in {source} (*.py, *.cu or *.ncu-rep files, or manifest lines)")
    if metrics or derived:
        problems = [
            replace(p, metrics=tuple(metrics), derived=tuple(derived)) if p.task != "lint" else p for p in problems
        ]
    if clocks not in (ClockControl.UNSPECIFIED, DEFAULT_CLOCK_CONTROL):
        problems = [replace(p, clock_control=clocks) if p.task == "profile" else p for p in problems]
    problems = [
        replace(problem, repeat=repeat)
        for problem in problems
        for repeat in range(repeats if problem.task in GPU_TASKS else 1)
    ]
    seen: dict[str, str] = {}
    for problem in problems:
        if problem.key in seen:
            raise errors.InvalidRequest(
                f"{problem.name} appears twice with the same task, metric set, kernel filter, clock control and"
                f" grid point (also as {seen[problem.key]})"
            )
        seen[problem.key] = problem.name
    return problems


def read_checkpoint(path: Path) -> dict[str, dict[str, Any]]:
    """The finished problems of a checkpoint by key (a later line for the same key wins).

    A last line cut short by a crash is ignored (`run_batch` trims it before resuming).
    """
    if not path.exists():
        return {}
    records: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        # Lines that are not this tool's records (edited by hand, another file) are skipped like cut ones.
        if isinstance(record, dict) and isinstance(record.get("key"), str) and "status" in record:
            records[record["key"]] = record
    return records


def _trim_cut_line(path: Path) -> None:
    """Drop a last line that a crash cut short (even one whose JSON is whole but lacks its newline)."""
    if path.exists():
        with path.open("rb+") as handle:
            data = handle.read()
            if data and not data.endswith(b"\n"):
                handle.truncate(data.rfind(b"\n") + 1)


def run_task(client: ProfilerClient, problem: Problem, content: bytes) -> ProblemResult:
    """Do one problem's task on the server, the file's content given (read where the batch runs). No chart is
    drawn: a batch keeps each problem's figures in its table, never its charts."""
    kernel_filter = KernelFilter(name_regex=problem.kernel_regex)
    if problem.task == "analyze":
        return client.analyze(
            content, kernel_filter=kernel_filter, metrics=problem.metrics, derived=problem.derived, skip_charts=True
        )
    source = KernelSource(main=SourceFile(name=Path(problem.name).name, content=content))
    if problem.task == "lint":
        return client.static_check(source)
    return client.profile(
        source,
        kernel_filter=kernel_filter,
        metric_set=problem.metric_set,
        metrics=problem.metrics,
        derived=problem.derived,
        clock_control=problem.clock_control,
        skip_charts=True,
    )


def profile_with(client: ProfilerClient) -> ProfileFn:
    """The per-problem function of a real batch: read the file, do its task on the server."""
    return lambda problem: run_task(client, problem, problem.content())


def record_of(
    problem: Problem, result: ProblemResult | None, status: str, error: str, seconds: float
) -> dict[str, Any]:
    """A problem's checkpoint record (`result` None: it failed before the server answered)."""
    record: dict[str, Any] = {
        "key": problem.key,
        "problem": problem.name,
        "params": dict(problem.params),
        "repeat": problem.repeat,
        "task": problem.task,
        "metric_set": problem.metric_set,
        "kernel_regex": problem.kernel_regex,
        "clock_control": "",
        "tags": dict(problem.tags),
        "status": status,
        "error": error,
        "findings": [],
        "target": "",
        "worker": "",
        "wall_seconds": seconds,
        "compile_seconds": None,
        "ncu_seconds": None,
        "device": "",
        "compute_capability": "",
        "ncu_version": "",
        "server_version": "",
        "driver_version": "",
        "host": "",
        "units": {},
        "kernels": [],
    }
    if isinstance(result, StaticCheckResult):
        record["findings"] = [finding.model_dump() for finding in result.findings]
    elif result is not None:
        record["compile_seconds"] = result.compile.seconds
        record["ncu_seconds"] = result.ncu.seconds
        record["target"] = result.target
        record["device"], record["compute_capability"] = result.device.name, result.device.compute_capability
        record["ncu_version"] = result.ncu.version
        record["metric_set"] = result.ncu.metric_set or problem.metric_set
        record["server_version"], record["host"] = result.server.version, result.server.host
        # The server's driver is not the one an analyzed report was captured under.
        record["driver_version"] = result.server.driver_version if problem.needs_gpu else ""
        if result.ncu.clock_control is not ClockControl.UNSPECIFIED:
            record["clock_control"] = result.ncu.clock_control.value
        for kernel in result.kernels:
            record["units"].update({name: figure.unit for name, figure in kernel.figures.items()})
            record["units"].update({name: metric.unit for name, metric in kernel.metrics.items()})
            record["kernels"].append(
                {
                    "kernel": kernel.name,
                    "launch_index": kernel.launch_index,
                    "nvtx": [stack.model_dump() for stack in kernel.nvtx],
                    "figures": {name: figure.value for name, figure in {**kernel.figures, **kernel.metrics}.items()},
                }
            )
    return record


def _outcome(result: ProblemResult) -> tuple[str, str]:
    """A result's status and error text."""
    if isinstance(result, StaticCheckResult):
        failing = [f"{f.line}:{f.column}: [{f.rule_id}] {f.message}" for f in result.findings if f.severity == "error"]
        return ("ok", "") if result.ok else (STATIC_CHECK_FAILED, "; ".join(failing))
    return ("ok" if result.ok else result.error.kind or "failed"), result.error.message


def run_one(profile: ProfileFn, problem: Problem) -> dict[str, Any]:
    """Do one problem's task; its outcome, success or not, as a checkpoint record."""
    start = time.monotonic()
    try:
        result = profile(problem)
    except errors.ProfsvcError as error:
        return record_of(problem, None, error.reason.value, error.message, time.monotonic() - start)
    except OSError as error:
        return record_of(problem, None, READ_ERROR, str(error), time.monotonic() - start)
    status, error_text = _outcome(result)
    return record_of(problem, result, status, error_text, time.monotonic() - start)


class ProgressBar:
    """A progress bar with rate, ETA and failures on stderr (rich's), drawn only when stderr is a terminal."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        console = Console(file=stream or sys.stderr)
        self.enabled = console.is_terminal
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        # Redrawn on each update, not by a thread: a batch's output stays in the order things happened.
        self._progress = Progress(
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]:.2f}/s"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[failed]} failed"),
            console=console,
            auto_refresh=False,
            transient=True,
            disable=not self.enabled,
        )
        self._task = self._progress.add_task("batch", total=total, rate=0.0, failed=0)

    def update(self, ok: bool) -> None:
        """Count one finished problem and redraw."""
        self.done += 1
        self.failed += not ok
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if not self._progress.live.is_started:
            self._progress.start()
        self._progress.update(self._task, completed=self.done, rate=rate, failed=self.failed)
        self._progress.refresh()

    def close(self) -> None:
        """Clear the bar's line."""
        if self._progress.live.is_started:
            self._progress.stop()


def require_table_libraries() -> None:
    """Fail before any work when pandas or pyarrow is missing."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise errors.PreconditionFailed(
            "batch results need pandas and pyarrow: pip install './client[batch]' (from the repository)",
            errors.Reason.UNAVAILABLE,
        ) from None


def _param_column(values: Sequence[Any]) -> tuple[pyarrow.DataType, Callable[[Any], str] | None]:
    """A swept constant's column type, as its values are (bool, int64, float64, string; else JSON text), and what
    turns a value into its cell where it is not the value itself."""
    import pyarrow as pa

    if all(isinstance(value, bool) for value in values):
        return pa.bool_(), None
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return pa.int64(), None
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
        return pa.float64(), None
    if all(isinstance(value, str) for value in values):
        return pa.string(), None
    return pa.string(), json.dumps


def _fixed_type(name: str) -> pyarrow.DataType:
    import pyarrow as pa

    return pa.float64() if name in FLOAT_COLUMNS else pa.int64() if name in INT_COLUMNS else pa.string()


def _table(records: Iterable[Mapping[str, Any]], figures: Sequence[FigureInfo] = ()) -> pyarrow.Table:
    """The results table: the fixed columns, a column per swept constant, then one float64 column per figure (the
    server's catalog, whether or not a row has a value, then any other figure the records hold), in name order."""
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    units: dict[str, str] = {figure.name: figure.unit for figure in figures}
    swept: dict[str, list[Any]] = {}
    for record in records:
        units.update(record["units"])
        common = {name: record.get(name, COLUMN_DEFAULTS.get(name)) for name in COLUMNS}
        common["tags"] = json.dumps(record["tags"], sort_keys=True)
        common["findings"] = json.dumps(common["findings"])
        common["params"] = json.dumps(common["params"], sort_keys=True)
        point = {PARAM_PREFIX + name: value for name, value in record.get("params", {}).items()}
        for column, value in point.items():
            swept.setdefault(column, []).append(value)
        for kernel in record["kernels"] or [{"kernel": "", "launch_index": None, "figures": {}}]:
            launch = {"kernel": kernel["kernel"], "launch_index": kernel["launch_index"]}
            # A checkpoint line written before the column existed has no ranges.
            launch["nvtx"] = json.dumps(kernel.get("nvtx", []))
            rows.append({**common, **point, **launch} | kernel["figures"])
    columns = [(pa.field(name, _fixed_type(name)), None) for name in COLUMNS]
    for column in sorted(swept):
        kind, convert = _param_column(swept[column])
        columns.append((pa.field(column, kind), convert))
    columns += [(pa.field(name, pa.float64(), metadata={"unit": units[name]}), None) for name in sorted(units)]
    schema = pa.schema([f for f, _ in columns], metadata={PARQUET_SCHEMA_KEY: PARQUET_SCHEMA_VERSION})

    def cells(name: str, convert: Callable[[Any], str] | None) -> list[Any]:
        # Keep None (null) where a row has no value: float64 columns read back as NaN.
        values = [row.get(name) for row in rows]
        return [convert(v) if convert and v is not None else v for v in values]

    return pa.table({f.name: pa.array(cells(f.name, convert), type=f.type) for f, convert in columns}, schema=schema)


def write_results(
    problems: Iterable[Problem],
    records: Mapping[str, Mapping[str, Any]],
    out: Path,
    figures: Sequence[FigureInfo] = (),
) -> int:
    """Write the parquet of `problems` (in their order) from checkpoint records, with a column for each of
    `figures` (the server's catalog); return the row count."""
    import pyarrow.parquet as pq

    table = _table((records[problem.key] for problem in problems if problem.key in records), figures)
    # Written aside and renamed: an interrupted write never leaves a half parquet under the real name.
    partial = out.with_name(out.name + ".writing")
    pq.write_table(table, partial)
    partial.replace(out)
    return table.num_rows


class Checkpoint:
    """The run's checkpoint: the problems still to do, and each finished one appended at once, synced."""

    def __init__(self, problems: list[Problem], out: Path, server: Capabilities | None = None) -> None:
        if out.is_dir():
            # Found now, not after every problem has been done.
            raise errors.InvalidRequest(f"--out {out} is a folder: name the parquet file to write")
        require_table_libraries()
        self.problems = problems
        self.out = out
        self.server = server or Capabilities()
        self.path = checkpoint_path(out)
        self.start = time.monotonic()
        _trim_cut_line(self.path)
        finished = {
            key for key, record in read_checkpoint(self.path).items() if record["status"] not in RETRIED_ON_RERUN
        }
        self.todo = [problem for problem in problems if problem.key not in finished]
        out.parent.mkdir(parents=True, exist_ok=True)
        self._sink: IO[str] | None = None

    def __enter__(self) -> Checkpoint:
        self._sink = self.path.open("a")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sink is not None:
            self._sink.close()

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one finished problem."""
        assert self._sink is not None, "add() inside `with checkpoint:`"
        # A problem the server never answered (or a static check, which names no server) has the provenance of
        # the server the batch asked for its capabilities.
        server = self.server
        record = {
            **record,
            "server_version": record.get("server_version") or server.server_version,
            "host": record.get("host") or server.host,
            "driver_version": record.get("driver_version")
            or (server.driver_version if record["task"] in GPU_TASKS else ""),
        }
        self._sink.write(json.dumps(record) + "\n")
        self._sink.flush()
        # A crash of the machine, not only of this process, must not lose a finished problem.
        os.fsync(self._sink.fileno())

    def finish(self) -> BatchSummary:
        """Write the parquet from the checkpoint; what the run did."""
        records = read_checkpoint(self.path)
        rows = write_results(self.problems, records, self.out, self.server.figures)
        statuses = Counter(records[problem.key]["status"] for problem in self.problems)
        ok = statuses.pop("ok", 0)
        total = len(self.problems)
        return BatchSummary(total, total - len(self.todo), ok, statuses, time.monotonic() - self.start, rows, self.out)


def run_batch(
    problems: list[Problem],
    out: Path,
    profile: ProfileFn,
    *,
    concurrency: int = 4,
    stream: IO[str] | None = None,
    server: Capabilities | None = None,
) -> BatchSummary:
    """Do the problems the checkpoint lacks, `concurrency` at a time, then write the parquet.

    `profile` is the per-problem call (`profile_with(client)` for a real batch); `server` the capabilities of
    the server it calls (its version on every row, a column for every figure of its catalog). An interruption
    (KeyboardInterrupt included) leaves the checkpoint holding every problem finished so far.
    """
    if concurrency < 1:
        raise errors.InvalidRequest("--concurrency must be at least 1")
    checkpoint = Checkpoint(problems, out, server)
    progress = ProgressBar(len(checkpoint.todo), stream)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="profsvc-batch")
    try:
        with checkpoint:
            # At most `concurrency` calls in flight: nothing queues up behind an interruption.
            queue = iter(checkpoint.todo)
            pending: set[Future[dict[str, Any]]] = set()
            while True:
                pending |= {
                    pool.submit(run_one, profile, problem) for problem in islice(queue, concurrency - len(pending))
                }
                if not pending:
                    break
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    record = future.result()
                    checkpoint.add(record)
                    progress.update(record["status"] == "ok")
    finally:
        # Never wait here for calls in flight: after an interruption the caller closes the channel, which ends them.
        pool.shutdown(wait=False, cancel_futures=True)
        progress.close()
    return checkpoint.finish()


def read_results(path: str | Path) -> pandas.DataFrame:
    """A batch's results as a DataFrame: the parquet, or a checkpoint (`.partial.jsonl`) of a run still going.

    Figure columns are float64 (NaN where not collected), `launch_index` a nullable Int64;
    `frame.attrs["units"]` maps each figure to its unit.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if path.name.endswith(CHECKPOINT_SUFFIX):
        table = _table(read_checkpoint(path).values())
    else:
        table = pq.read_table(path)
    frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
    frame.attrs["units"] = {f.name: f.metadata[b"unit"].decode() for f in table.schema if f.metadata}
    return frame


def run_command(run: Callable[[], BatchSummary], out: Path) -> int:
    """`profsvc batch`: run, print the one-line summary on stderr; exit 0, or 1 when a problem failed."""
    try:
        summary = run()
    except KeyboardInterrupt:
        held = len(read_checkpoint(checkpoint_path(out)))
        print(
            f"profsvc batch: interrupted; {checkpoint_path(out)} holds {held} finished problems: rerun to resume",
            file=sys.stderr,
        )
        return 130
    print(summary.line(), file=sys.stderr)
    return 0 if not summary.failed else 1


__all__ = [
    "COLUMNS",
    "TASKS",
    "BatchSummary",
    "Checkpoint",
    "Problem",
    "ProgressBar",
    "checkpoint_path",
    "discover",
    "profile_with",
    "read_checkpoint",
    "read_results",
    "record_of",
    "run_batch",
    "run_command",
    "run_one",
    "run_task",
    "write_results",
]
