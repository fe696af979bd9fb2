# PYTHON_ARGCOMPLETE_OK (argcomplete looks for this marker: shell completion, README "Command line")
"""The `profsvc` command line.

Remote commands talk to a server given by --server HOST:PORT (or the
PROFSVC_SERVER environment variable). Without one, the same service runs
embedded in this process, which needs the server package (`pip install -e .` in the repository).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import Any

import argcomplete
from rich.text import Text

from profsvc_client.client import ProfilerClient, load_source
from profsvc_client.policy import build_policy
from profsvc_client.render import capabilities_text, repeat_markdown, repeat_text
from profsvc_client.settings import resolve_settings
from profsvc_contract import errors
from profsvc_contract.channel import port_number
from profsvc_contract.document import SCHEMA_VERSION, dumps, error_document, result_document
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    DEFAULT_PRECISION,
    BenchmarkResult,
    ClockControl,
    CompileResult,
    CorrectnessResult,
    EvaluateResult,
    KernelFilter,
    Precision,
    ProfileResult,
    Progress,
    RepeatResult,
    StaticCheckResult,
    StaticPolicy,
)

# Entry point groups other packages register into: CLI subcommands (the server's `serve`), and the service a
# command without --server runs in its own process.
COMMANDS_GROUP = "profsvc.commands"
EMBEDDED_GROUP = "profsvc.embedded"
EXIT_OK = 0
# The shell's convention for a command stopped by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130
# 128 + SIGPIPE, what the shell's own tools exit with when the reader of their output goes away.
EXIT_BROKEN_PIPE = 141
EXIT_RESULT_FAILED = 1


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default="", help="HOST:PORT of a server (or PROFSVC_SERVER; default: embedded)")
    parser.add_argument("--token-file", type=Path, default=None, help="file with the bearer token (or PROFSVC_TOKEN)")
    parser.add_argument("--tls", action="store_true", help="connect with TLS, verifying the server with system roots")
    parser.add_argument("--tls-ca", type=Path, default=None, help="PEM CA that signed the server (or PROFSVC_TLS_CA)")


def _add_target(parser: argparse.ArgumentParser) -> None:
    _add_connection(parser)
    parser.add_argument(
        "--format", choices=("text", "json", "md"), default="text", help="text, json, or md (Markdown for a PR)"
    )


def _add_session(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", default="", help="session id: the report adds a delta against its last result")


def _add_metrics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        dest="metrics",
        metavar="NAME",
        help="an ncu metric to report besides the catalog's (repeatable; `ncu --query-metrics` lists them)",
    )
    parser.add_argument(
        "--derived",
        action="append",
        default=[],
        metavar="NAME=FORMULA",
        help="a metric computed from ncu metrics, e.g. 'read_bw=dram__bytes_read.sum / gpu__time_duration.sum'",
    )


def _add_repeat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="profile N times, each a full ncu run: every figure's median, min, max and spread over them",
    )


def _add_precision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--precision",
        choices=Precision.choices(),
        default=DEFAULT_PRECISION.value,
        help="what both models run in: fp32 (the problem's own dtypes, the default), or fp16 or bf16 (inputs and"
        " weights cast, tolerances as KernelBench's)",
    )


def _add_clock_control(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clock-control",
        choices=ClockControl.choices(),
        default=DEFAULT_CLOCK_CONTROL.value,
        help="how ncu sets the GPU clocks: none (as they run, the default) or base (locked to the base clocks)",
    )


def _add_filter(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel", default="", help="regular expression on kernel names")
    parser.add_argument("--nvtx-include", action="append", default=[], help="NVTX range to profile (ncu syntax)")
    parser.add_argument("--launch-count", type=int, default=0, help="profile at most this many launches")
    parser.add_argument("--launch-skip", type=int, default=0, help="skip this many matching launches first")


class _RuleSeverity(argparse.Action):
    """--error/--warn/--off RULE: appends (rule, severity) to one list, so later flags win over earlier ones."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: object, *_: object
    ) -> None:
        getattr(namespace, self.dest).append((str(value), str(self.const)))


def _add_policy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", type=Path, default=None, help="static-check policy (TOML: name, [rules])")
    parser.set_defaults(rule_severities=[])
    flags = (("--error", "error", "an error"), ("--warn", "warning", "a warning"), ("--off", "off", "ignored"))
    for flag, severity, meaning in flags:
        parser.add_argument(
            flag,
            dest="rule_severities",
            action=_RuleSeverity,
            const=severity,
            metavar="RULE",
            help=f"make the static-check rule RULE {meaning} (repeatable; after --policy)",
        )


def version_line() -> str:
    """The installed packages' versions and the JSON documents' schema version."""
    found = []
    for package in ("profsvc-client", "profsvc-contract", "profsvc"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue  # the server's package is optional beside the client
    return f"{', '.join(found) or 'profsvc (not installed: a source tree)'} (JSON schema {SCHEMA_VERSION})"


class _Version(argparse.Action):
    """--version on one line (argparse's own action wraps it to the terminal's width)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="profsvc", description="GPU kernel profiling service (Nsight Compute).")
    parser.add_argument("--version", action=_Version, help="show the installed versions and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    # Commands of other installed packages (the server's `serve`), found by entry point, never imported by name.
    for command in entry_points(group=COMMANDS_GROUP):
        command.load()(commands)

    caps = commands.add_parser("capabilities", help="what the server offers (GPUs, ncu, metric sets)")
    _add_target(caps)

    compile_ = commands.add_parser("compile", help="build a problem or .cu program, report diagnostics")
    compile_.add_argument("file", type=Path)
    compile_.add_argument("--reference", type=Path, default=None, help="separate reference module")
    compile_.add_argument("--nvcc-flag", action="append", default=[], help="extra nvcc flag for a .cu program")
    _add_target(compile_)

    profile = commands.add_parser(
        "profile",
        help="profile a problem or Python program (.py), or a CUDA program (.cu), under ncu",
        usage="profsvc profile FILE [options] [-- PROGRAM ARGS...]",
        epilog="A program's arguments follow `--`, after every option: profsvc profile prog.py --kernel gemm -- -n 4",
    )
    profile.add_argument("file", type=Path)
    profile.add_argument("--reference", type=Path, default=None, help="separate reference module")
    profile.add_argument(
        "--target",
        choices=("candidate", "reference"),
        default="unspecified",
        help="which model of a problem runs (default: ModelNew where there is one, else the reference)",
    )
    profile.add_argument("--nvcc-flag", action="append", default=[], help="extra nvcc flag for a .cu program")
    profile.add_argument(
        "--metric-set", default="", help="basic, default, full or timing (the server's: `profsvc capabilities`)"
    )
    _add_metrics(profile)
    profile.add_argument(
        "--out", type=Path, default=None, help="save the .ncu-rep, result.json, report.txt, report.html and the charts"
    )
    _add_repeat(profile)
    _add_clock_control(profile)
    _add_filter(profile)
    _add_session(profile)
    _add_target(profile)

    lint = commands.add_parser("lint", help="static check: the known ways candidates game kernel benchmarks")
    lint.add_argument("file", type=Path)
    lint.add_argument("--reference", type=Path, default=None, help="separate reference module")
    _add_policy(lint)
    _add_target(lint)

    check = commands.add_parser("check", help="correctness against the reference on fresh random inputs")
    check.add_argument("file", type=Path)
    check.add_argument("--reference", type=Path, default=None, help="separate reference module")
    check.add_argument("--trials", type=int, default=0, help="trials (default 5)")
    _add_precision(check)
    _add_target(check)

    time_ = commands.add_parser("time", help="time candidate and reference the same way; memory and launches")
    time_.add_argument("file", type=Path)
    time_.add_argument("--reference", type=Path, default=None, help="separate reference module")
    time_.add_argument("--trials", type=int, default=0, help="timed calls per model (default 100)")
    time_.add_argument(
        "--target",
        choices=("candidate", "reference"),
        default="unspecified",
        help="time the reference alone with `reference` (default: the reference alone where there is no ModelNew)",
    )
    _add_precision(time_)
    _add_target(time_)

    evaluate = commands.add_parser("evaluate", help="everything for a submission: check, compile, time, profile")
    evaluate.add_argument("file", type=Path)
    evaluate.add_argument("--reference", type=Path, default=None, help="separate reference module")
    evaluate.add_argument("--trials", type=int, default=0, help="correctness trials (default 5)")
    evaluate.add_argument("--skip-profile", action="store_true", help="no ncu profile (and no SOL score)")
    _add_precision(evaluate)
    _add_clock_control(evaluate)
    _add_policy(evaluate)
    _add_session(evaluate)
    _add_target(evaluate)

    analyze = commands.add_parser("analyze", help="read an existing .ncu-rep (no GPU needed)")
    analyze.add_argument("report", type=Path)
    analyze.add_argument(
        "--out", type=Path, default=None, help="save result.json, report.txt, report.html and the charts here"
    )
    _add_filter(analyze)
    _add_metrics(analyze)
    _add_session(analyze)
    _add_target(analyze)

    mcp = commands.add_parser("mcp", help="serve the agent tools over MCP (stdio or streamable HTTP)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default loopback only)")
    mcp.add_argument("--port", type=port_number, default=8000, help="HTTP port (default 8000; the endpoint is /mcp)")
    mcp.add_argument("--reference", type=Path, default=None, help="reference module for calls that bring none")
    mcp.add_argument("--policy", type=Path, default=None, help="static-check policy for calls that set none (TOML)")
    mcp.add_argument("--insecure", action="store_true", help="allow a non-loopback --host (HTTP has no auth)")
    _add_connection(mcp)

    batch = commands.add_parser("batch", help="profile many problems into one parquet table (resumable)")
    batch.add_argument("input", type=Path, help="directory of *.py / *.cu problems and *.ncu-rep, or a JSONL manifest")
    batch.add_argument("--out", type=Path, required=True, help="the parquet to write (checkpoint: OUT.partial.jsonl)")
    batch.add_argument("--concurrency", type=int, default=4, help="problems in flight at once (default 4)")
    batch.add_argument("--metric-set", default="", help="metric set for problems that name none")
    _add_metrics(batch)
    batch.add_argument("--kernel", default="", help="kernel name regex for problems that name none")
    batch.add_argument(
        "--task", choices=("profile", "lint"), default="profile", help="for *.py / *.cu (a .ncu-rep is analyzed)"
    )
    _add_clock_control(batch)
    batch.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="profile each Python problem with its module constant NAME set to each value (repeatable: the grid)",
    )
    batch.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="profile each problem N times, each a full ncu run: one row per repeat (column `repeat`)",
    )
    batch.add_argument(
        "--cluster", default="", help="run on a Dask cluster: its scheduler (tcp://HOST:8786) or 'local'"
    )
    batch.add_argument("--gpus", type=int, default=None, help="with --cluster local: GPUs to use (default all)")
    batch.add_argument(
        "--per-gpu", type=int, choices=(1, 2, 4), default=2, help="with --cluster: problems at once per GPU (default 2)"
    )
    _add_connection(batch)

    cluster = commands.add_parser("cluster", help="start a Dask cluster for `profsvc batch --cluster`")
    kinds = cluster.add_subparsers(dest="cluster_kind", required=True)
    local = kinds.add_parser("local", help="this host: a worker per GPU (CUDA_VISIBLE_DEVICES set, GPU=1 declared)")
    local.add_argument("--gpus", type=int, default=None, help="GPUs to use (default all nvidia-smi lists)")
    local.add_argument("--cpu-workers", type=int, default=0, help="workers without a GPU, for lint and analyze")
    local.add_argument("--host", default="127.0.0.1", help="address of the scheduler and workers (default loopback)")
    local.add_argument("--port", type=port_number, default=8786, help="the scheduler's port (default 8786)")
    local.add_argument(
        "--dashboard-port", type=port_number, default=8787, help="the Dask dashboard's port (default 8787)"
    )
    local.add_argument("--state-dir", type=Path, default=None, help="build cache and the workers' state (as serve)")
    local.add_argument("--no-warm-workers", action="store_true", help="the workers' services keep nothing warm")
    local.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback --host (Dask runs what any caller sends)"
    )
    return parser


@contextlib.contextmanager
def connect(args: argparse.Namespace) -> Iterator[ProfilerClient]:
    """A client for the configured server, or for a service embedded in this process."""
    settings = resolve_settings(server=args.server, token_file=args.token_file, tls=args.tls, tls_ca=args.tls_ca)
    if settings.server:
        token = settings.token.get_secret_value() if settings.token else None
        client = ProfilerClient(
            settings.server, token=token, tls=settings.tls, root_certificates=settings.root_certificates()
        )
        with client:
            yield client
        return
    if getattr(args, "session", ""):
        raise errors.InvalidRequest(
            "--session compares with the last result a server kept: give --server HOST:PORT (a run without one "
            "keeps nothing once it exits)"
        )
    services = list(entry_points(group=EMBEDDED_GROUP))
    if not services:
        raise errors.PreconditionFailed(
            "no --server given and the server package is not installed here: pass --server HOST:PORT, or install "
            "it from the repository (pip install -e .)",
            errors.Reason.UNAVAILABLE,
        )
    # The service in this process, from the server package (profsvc.cli.embedded).
    with services[0].load()() as target, ProfilerClient(target) as client:
        yield client


class ProgressLine:
    """A live progress line on stderr (rich's status), shown only when stderr is a terminal."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.status: Any = None

    def __call__(self, event: Progress) -> None:
        if not self.console.is_terminal:
            return
        text = f"[{event.stage.value}] {event.message}"
        if event.passes:
            text += f" ({event.passes} passes)"
        line = f"{text[:150]}  {event.elapsed_seconds:.1f}s"
        if self.status is None:
            # Plain text: a kernel name with brackets is not rich markup.
            self.status = self.console.status(Text(line))
            self.status.start()
        else:
            self.status.update(Text(line))

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()


def _filter(args: argparse.Namespace) -> KernelFilter:
    return KernelFilter(
        name_regex=args.kernel,
        nvtx_include=args.nvtx_include,
        launch_count=args.launch_count,
        launch_skip=args.launch_skip,
    )


def _emit_result(result: ProfileResult, args: argparse.Namespace, client: ProfilerClient) -> int:
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(dumps(result_document(result)))
        (args.out / "report.txt").write_text(result.report_text)
        for artifact in result.artifacts:
            client.download_artifact(artifact.id, args.out)
    rendered = {"json": lambda: dumps(result_document(result)), "md": lambda: result.report_markdown}
    print(rendered.get(args.format, lambda: result.report_text)(), end="")
    return EXIT_OK if result.ok else EXIT_RESULT_FAILED


def _emit_repeats(result: RepeatResult, args: argparse.Namespace, client: ProfilerClient) -> int:
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(dumps(result_document(result)))
        (args.out / "report.txt").write_text(repeat_text(result))
        # Each repeat's own files (its .ncu-rep, report.html) apart: their names are the same in every repeat.
        for index, run in enumerate(result.runs):
            folder = args.out / f"repeat-{index}"
            folder.mkdir(exist_ok=True)
            for artifact in run.artifacts:
                client.download_artifact(artifact.id, folder)
    rendered = {"json": lambda: dumps(result_document(result)), "md": lambda: repeat_markdown(result)}
    print(rendered.get(args.format, lambda: repeat_text(result))(), end="")
    return EXIT_OK if result.ok else EXIT_RESULT_FAILED


def _emit_compile(result: CompileResult, args: argparse.Namespace) -> int:
    if args.format == "json":
        print(dumps(result_document(result)), end="")
    else:
        state = "OK" if result.ok else "FAILED"
        cached = " (cached)" if result.units and all(u.cached for u in result.units) else ""
        print(f"compile {state} in {result.seconds:.2f} s{cached}")
        for unit in result.units:
            how = "cached" if unit.cached else f"{unit.seconds:.1f} s"
            route = f", {unit.route}" if unit.route else ""
            print(f"  {'could not build' if unit.failed else 'built'} {unit.name} ({how}{route})")
            if unit.route_reason:
                print(f"    {unit.route_reason}: {unit.route_detail}")
        for d in result.diagnostics:
            # file:line:column as compilers print it; a message about the whole file has no line.
            where = f"{d.file}:{d.line}:{d.column}: " if d.file and d.line else f"{d.file}: " if d.file else ""
            print(f"{where}{d.severity.value}: {d.message}")
    return EXIT_OK if result.ok else EXIT_RESULT_FAILED


def _run_tool(client: ProfilerClient, args: argparse.Namespace, policy: StaticPolicy | None) -> int:
    source = load_source(args.file, args.reference, target=getattr(args, "target", "unspecified"))
    result: StaticCheckResult | CorrectnessResult | BenchmarkResult | EvaluateResult
    if args.command == "lint":
        result = client.static_check(source, policy=policy)
        text = result.report_text
    elif args.command == "check":
        result = client.check_correctness(source, trials=args.trials, precision=args.precision)
        text = result.report_text
    elif args.command == "time":
        result = client.benchmark(source, trials=args.trials, precision=args.precision)
        text = result.report_text
    else:
        progress = ProgressLine()
        try:
            result = client.evaluate(
                source,
                trials=args.trials,
                skip_profile=args.skip_profile,
                session_id=args.session,
                on_progress=progress,
                policy=policy,
                precision=args.precision,
                clock_control=args.clock_control,
                skip_charts=True,  # never saved: evaluate has no --out
            )
        finally:
            progress.close()
        text = result.report_markdown if args.format == "md" else result.report_text
    if args.format == "json":
        text = dumps(result_document(result))
    elif args.format == "md" and not isinstance(result, EvaluateResult):
        text = f"```text\n{text}```\n"
    print(text, end="")
    return EXIT_OK if result.ok else EXIT_RESULT_FAILED


def _mcp(args: argparse.Namespace) -> int:
    try:
        from profsvc_client.mcp_server import serve_mcp
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise errors.PreconditionFailed(
            "`profsvc mcp` needs the MCP SDK: pip install './client[mcp]' (from the repository)",
            errors.Reason.UNAVAILABLE,
        ) from None
    with contextlib.suppress(KeyboardInterrupt):
        serve_mcp(
            lambda: connect(args),
            args.transport,
            args.host,
            args.port,
            reference=args.reference,
            policy=args.policy,
            insecure=args.insecure,
        )
    return EXIT_OK


def _dask_module(name: str) -> Any:
    """A module of ours that needs Dask, or the one-line error saying how to install it."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in ("dask", "distributed"):
            raise
        raise errors.PreconditionFailed(
            "Dask clusters need dask and distributed: pip install './client[cluster]' (from the repository)",
            errors.Reason.UNAVAILABLE,
        ) from None


def _batch(args: argparse.Namespace) -> int:
    from profsvc_client.batch import discover, profile_with, run_batch, run_command
    from profsvc_client.sweep import parse_sweeps

    problems = discover(
        args.input,
        kernel_regex=args.kernel,
        metric_set=args.metric_set,
        task=args.task,
        metrics=args.metrics,
        derived=args.derived,
        sweep=parse_sweeps(args.sweep),
        repeats=args.repeat,
        clock_control=args.clock_control,
    )
    if not args.cluster:
        if args.gpus is not None:
            raise errors.InvalidRequest("--gpus goes with --cluster local")
        with connect(args) as client:
            server = client.capabilities()
            return run_command(
                lambda: run_batch(
                    problems, args.out, profile_with(client), concurrency=args.concurrency, server=server
                ),
                args.out,
            )
    if args.server:
        raise errors.InvalidRequest("--server and --cluster: the cluster's workers run the service; give one")
    cluster_batch = _dask_module("profsvc_client.cluster_batch")
    return run_command(
        lambda: cluster_batch.batch_on_cluster(
            problems, args.out, args.cluster, per_gpu=args.per_gpu, concurrency=args.concurrency, gpus=args.gpus
        ),
        args.out,
    )


def _cluster(args: argparse.Namespace) -> int:
    cluster_local = _dask_module("profsvc_client.cluster_local")
    if not cluster_local.is_loopback(args.host) and not args.insecure:
        raise errors.InvalidRequest(
            f"refusing to serve a Dask scheduler on {args.host}: it runs whatever code a caller sends."
            " Keep it on loopback (SSH tunnel), or pass --insecure on a network only trusted hosts reach"
        )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with cluster_local.local_cluster(
        gpus=args.gpus,
        cpu_workers=args.cpu_workers,
        state_dir=args.state_dir,
        warm_workers=not args.no_warm_workers,
        host=args.host,
        port=args.port,
        dashboard_port=args.dashboard_port,
    ) as cluster:
        print(cluster_local.describe(cluster), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    print("profsvc cluster: stopped", file=sys.stderr)
    return EXIT_OK


def _profile(client: ProfilerClient, args: argparse.Namespace) -> int:
    """`profsvc profile`: once, or `--repeat N` times with the statistics over the repeats."""
    source = load_source(args.file, args.reference, args.nvcc_flag, target=args.target, args=args.program_args)
    options: dict[str, Any] = {
        "kernel_filter": _filter(args),
        "metric_set": args.metric_set,
        "metrics": args.metrics,
        "derived": args.derived,
        # The result's files are made where they are saved: report.html and the charts only with --out.
        "html_report": args.out is not None,
        "skip_charts": args.out is None,
        "session_id": args.session,
        "clock_control": args.clock_control,
    }
    progress = ProgressLine()
    outcome: ProfileResult | RepeatResult
    try:
        if args.repeat > 1:
            outcome = client.profile_repeated(source, repeats=args.repeat, on_progress=progress, **options)
        else:
            outcome = client.profile(source, on_progress=progress, **options)
    finally:
        progress.close()
    if isinstance(outcome, RepeatResult):
        return _emit_repeats(outcome, args, client)
    return _emit_result(outcome, args, client)


def run(args: argparse.Namespace) -> int:
    """Execute one parsed command; return the exit code."""
    if getattr(args, "run_command", None) is not None:
        return int(args.run_command(args))
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "batch":
        return _batch(args)
    if args.command == "cluster":
        return _cluster(args)
    if getattr(args, "repeat", 1) < 1:
        raise errors.InvalidRequest(f"--repeat must be at least 1, not {args.repeat}")
    # A policy file is read (and rejected) before any server is reached or started.
    policy = build_policy(args.policy, args.rule_severities) if args.command in ("lint", "evaluate") else None
    with connect(args) as client:
        if args.command == "capabilities":
            print(capabilities_text(client.capabilities(), args.format), end="")
            return EXIT_OK
        if args.command == "compile":
            return _emit_compile(client.compile(load_source(args.file, args.reference, args.nvcc_flag)), args)
        if args.command in ("lint", "check", "time", "evaluate"):
            return _run_tool(client, args, policy)
        if args.command == "analyze":
            result = client.analyze(
                args.report,
                kernel_filter=_filter(args),
                session_id=args.session,
                metrics=args.metrics,
                derived=args.derived,
                html_report=args.out is not None,
                skip_charts=args.out is None,
            )
            return _emit_result(result, args, client)
        return _profile(client, args)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line on stderr and a non-zero exit code for any error."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` is a program's own (argparse would take `-n 4` for options).
    split = argv.index("--") if "--" in argv else len(argv)
    parser = build_parser()
    # Answers the shell's completion request and exits, when the shell asks (see the README).
    argcomplete.autocomplete(parser)
    args = parser.parse_args(argv[:split])
    args.program_args = argv[split + 1 :]
    if args.program_args and args.command != "profile":
        parser.error(f"{args.command} takes no program arguments (only profile runs a program: profile FILE -- ARGS)")
    try:
        code = run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below, not in Python's flush at exit
        return code
    except errors.ProfsvcError as error:
        code = errors.exit_code(error)
        if getattr(args, "format", "") == "json":
            print(dumps(error_document(error.reason.value, error.message, code, error.request_id)), end="")
        request = f" (request id {error.request_id})" if error.request_id else ""
        print(f"profsvc: error: {error.message} [{error.reason.value}]{request}", file=sys.stderr)
        return code
    except BrokenPipeError:
        # `profsvc analyze ... | head`: the reader has what it wanted. Stop quietly; stdout points at /dev/null
        # so that Python's flush at exit does not fail on the closed pipe again.
        with contextlib.suppress(OSError, ValueError):  # a stdout without a file descriptor has no flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as error:
        # "cannot read /x.py: No such file or directory", not Python's "[Errno 2] ...: '/x.py'".
        what = f"{error.filename}: {error.strerror}" if error.filename and error.strerror else str(error)
        code = errors.EXIT_CODES[errors.InvalidRequest]
        if getattr(args, "format", "") == "json":
            print(dumps(error_document(errors.Reason.BAD_ARGUMENT.value, what, code)), end="")
        print(f"profsvc: error: {what} [{errors.Reason.BAD_ARGUMENT.value}]", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print("profsvc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
