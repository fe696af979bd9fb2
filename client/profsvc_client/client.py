"""`ProfilerClient`: the typed, synchronous gRPC client of profsvc."""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from pydantic import BaseModel

from profsvc_client.repeats import aggregate_repeats, check_repeats, numbered_progress
from profsvc_contract import errors
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract._proto import profiler_pb2_grpc as pb_grpc
from profsvc_contract.channel import (
    CHANNEL_OPTIONS,
    HEALTH_SERVICE,
    MAX_MESSAGE_BYTES,
    STATUS_DETAILS_KEY,
    UPLOAD_CHUNK_BYTES,
)
from profsvc_contract.convert import enum_number, to_model, to_proto
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    DEFAULT_PRECISION,
    BenchmarkResult,
    Capabilities,
    ClockControl,
    CompileResult,
    CorrectnessResult,
    EvaluateResult,
    KernelFilter,
    KernelSource,
    Precision,
    ProfileResult,
    Progress,
    RepeatResult,
    SourceFile,
    SourceKind,
    StaticCheckResult,
    StaticPolicy,
    Target,
)

R = TypeVar("R", bound=BaseModel)
P = TypeVar("P", bound=Message)


def service_config(load_balancing: str, *, health_check: bool = False) -> str:
    """The `grpc.service_config` channel option that picks a load-balancing policy (e.g. "round_robin").

    With `health_check`, the channel watches each server's standard health service and sends calls only to those
    that answer SERVING: a server that drains or dies leaves the rotation as soon as its health stream says so.
    """
    config: dict[str, object] = {"loadBalancingConfig": [{load_balancing: {}}]}
    if health_check:
        config["healthCheckConfig"] = {"serviceName": HEALTH_SERVICE}
    return json.dumps(config)


def multi_address_target(servers: str) -> str:
    """One channel target for several servers: "h1:p1,h2:p2" becomes "ipv4:a1:p1,a2:p2".

    gRPC's `ipv4:` scheme takes address literals only, so host names are resolved here, once.
    """
    addresses = []
    for server in (part.strip() for part in servers.split(",")):
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise errors.InvalidRequest(f"server address {server!r} is not HOST:PORT", errors.Reason.BAD_ARGUMENT)
        try:
            address = str(ipaddress.IPv4Address(host))
        except ValueError:
            try:
                address = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            except OSError as error:
                raise errors.InvalidRequest(
                    f"cannot resolve {host!r} to an IPv4 address (several servers need IPv4): {error}",
                    errors.Reason.BAD_ARGUMENT,
                ) from None
        addresses.append(f"{address}:{port}")
    return "ipv4:" + ",".join(addresses)


def load_source(
    path: str | Path,
    reference: str | Path | None = None,
    nvcc_flags: list[str] | None = None,
    *,
    target: Target | str = Target.UNSPECIFIED,
    args: list[str] | None = None,
) -> KernelSource:
    """Read a problem or program file (and optionally a separate reference) into a KernelSource.

    `target`: which model of a Python problem runs (default: the candidate where there is one); `args`: what a
    program is run with.
    """
    main = Path(path)
    source = KernelSource(
        main=SourceFile(name=main.name, content=main.read_bytes()),
        nvcc_flags=list(nvcc_flags or []),
        target=Target(target),
        args=list(args or []),
    )
    if reference is not None:
        ref = Path(reference)
        source.reference = SourceFile(name=ref.name, content=ref.read_bytes())
    return source


def _status_details(error: grpc.RpcError) -> status_pb2.Status | None:
    # Sync calls and grpc.aio errors both carry the rich status in this trailing metadata entry.
    trailing = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == STATUS_DETAILS_KEY:
            return status_pb2.Status.FromString(value)
    return None


def translate_error(error: grpc.RpcError) -> errors.ProfsvcError:
    """Turn a gRPC error (sync or grpc.aio) into the profsvc exception its ErrorInfo reason names."""
    status = _status_details(error)
    message = error.details() if hasattr(error, "details") else str(error)
    request_id = ""
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == errors.ERROR_DOMAIN:
                request_id = info.metadata.get("request_id", "")
                try:
                    reason = errors.Reason(info.reason)
                except ValueError:
                    break
                return errors.error_for(reason, message or "", request_id)
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    cls = errors.CODE_CLASSES.get(code, errors.InternalError)
    if code == grpc.StatusCode.UNAVAILABLE:
        message = f"no profsvc server answered: {message}"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and (message or "").startswith("CLIENT: Sent message larger"):
        # Refused by this client before sending (the message limit), not a full queue on the server.
        return over_message_limit("the request")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and (message or "").startswith("SERVER: Received message larger"):
        # Refused by the server's receive limit (grpc's own message, no reason code), not a full queue.
        message = f"the request is too large for the server: {message}"
        return errors.InvalidRequest(message, errors.Reason.SOURCE_TOO_LARGE)
    return cls(message or code.name, None, request_id)


def precision_number(message_type: type[Message], precision: Precision | str) -> int:
    """A request's `precision` field for a mode the caller names; InvalidRequest listing the modes otherwise."""
    return enum_number(message_type, "precision", Precision.named(precision, "precision"))


def clock_control_number(message_type: type[Message], clock_control: ClockControl | str) -> int:
    """A request's `clock_control` field for a value the caller names; InvalidRequest listing them otherwise."""
    return enum_number(message_type, "clock_control", ClockControl.named(clock_control, "clock control"))


def profile_request(
    source: KernelSource,
    kernel_filter: KernelFilter | None,
    metric_set: str,
    session_id: str,
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
    html_report: bool = False,
    clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    skip_charts: bool = False,
) -> pb.ProfileRequest:
    """The ProfileRequest for these arguments (shared by the sync and asyncio clients)."""
    return pb.ProfileRequest(
        source=to_proto(source, pb.KernelSource),
        filter=to_proto(kernel_filter or KernelFilter(), pb.KernelFilter),
        metric_set=metric_set,
        session_id=session_id,
        metrics=list(metrics),
        derived=list(derived),
        html_report=html_report,
        skip_charts=skip_charts,
        clock_control=clock_control_number(pb.ProfileRequest, clock_control),
    )


UINT32_MAX = 2**32 - 1


def over_message_limit(what: str) -> errors.InvalidRequest:
    """The error for something over the gRPC message limit (the client's own, before anything is sent)."""
    message = f"{what} is over the {MAX_MESSAGE_BYTES // 2**20} MiB message limit"
    return errors.InvalidRequest(message, errors.Reason.SOURCE_TOO_LARGE)


def trials_request(
    message_type: type[P], source: KernelSource, trials: int, precision: Precision | str, **fields: Any
) -> P:
    """A request carrying a source, a trial count and a precision mode (correctness, benchmark, evaluate; both
    clients).

    `trials` goes on the wire as uint32: anything else is a clear error instead of protobuf's.
    """
    if not 0 <= trials <= UINT32_MAX:
        raise errors.InvalidRequest(f"trials = {trials} is out of range (0 for the server's default, or a count)")
    number = precision_number(message_type, precision)
    return message_type(source=to_proto(source, pb.KernelSource), trials=trials, precision=number, **fields)


def static_check_request(source: KernelSource, policy: StaticPolicy | None) -> pb.StaticCheckRequest:
    """The StaticCheckRequest for a source and an optional policy (both clients)."""
    request = pb.StaticCheckRequest(source=to_proto(source, pb.KernelSource))
    if policy is not None:
        request.policy.CopyFrom(to_proto(policy, pb.StaticPolicy))
    return request


def evaluate_request(
    source: KernelSource,
    trials: int,
    skip_profile: bool,
    session_id: str,
    policy: StaticPolicy | None,
    precision: Precision | str = DEFAULT_PRECISION,
    clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    skip_charts: bool = False,
) -> pb.EvaluateRequest:
    """The EvaluateRequest (both clients)."""
    request = trials_request(
        pb.EvaluateRequest,
        source,
        trials,
        precision,
        skip_profile=skip_profile,
        session_id=session_id,
        clock_control=clock_control_number(pb.EvaluateRequest, clock_control),
        skip_charts=skip_charts,
    )
    if policy is not None:
        request.policy.CopyFrom(to_proto(policy, pb.StaticPolicy))
    return request


def _file_pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while piece := handle.read(UPLOAD_CHUNK_BYTES):
            yield piece


def _upload(first: pb.AnalyzeRequest, pieces: Iterator[bytes]) -> Iterator[pb.AnalyzeRequest]:
    yield first
    for piece in pieces:
        yield pb.AnalyzeRequest(chunk=piece)


def analyze_requests(
    report: bytes | str | Path,
    kernel_filter: KernelFilter | None,
    session_id: str,
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
    html_report: bool = False,
    skip_charts: bool = False,
) -> Iterator[pb.AnalyzeRequest]:
    """The Analyze upload for a report given as a path or as its bytes: a first message naming the file, its size
    and the options, then the file in pieces of UPLOAD_CHUNK_BYTES (a file is read one piece at a time)."""
    filename = ""
    if isinstance(report, str | Path):
        path = Path(report)
        # Checked before reading: a folder, a FIFO or /dev/zero would fail obscurely or never return.
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not a regular file" if path.exists() else "missing"
            raise errors.InvalidRequest(f"report {str(report) or '(empty path)'} is {what}")
        filename, size, pieces = path.name, path.stat().st_size, _file_pieces(path)
    else:
        data = report
        size = len(data)
        pieces = (data[start : start + UPLOAD_CHUNK_BYTES] for start in range(0, size, UPLOAD_CHUNK_BYTES))
    first = pb.AnalyzeRequest(
        filename=filename,
        size=size,
        filter=to_proto(kernel_filter or KernelFilter(), pb.KernelFilter),
        session_id=session_id,
        metrics=list(metrics),
        derived=list(derived),
        html_report=html_report,
        skip_charts=skip_charts,
    )
    return _upload(first, pieces)


def channel_setup(
    target: str, load_balancing: str | None, options: Sequence[tuple[str, str | int]], *, health_check: bool = True
) -> tuple[str, list[tuple[str, str | int]]]:
    """The channel target and options: several HOST:PORTs become one round_robin channel, health-checked.

    `health_check` False leaves the check out: gRPC's health-check calls carry no call metadata, so they cannot
    pass a server that asks every call for a token. Such a channel routes by connection state alone (a dead
    server leaves the rotation when its connection drops; a draining one answers UNAVAILABLE, and the call is
    made again on another).
    """
    for address in target.split(","):
        port = address.strip().rsplit(":", 1)[-1] if ":" in address else ""
        # grpc would take port 99999 modulo 65536 and connect somewhere else without a word.
        if port.isdigit() and int(port) > 65535:
            raise errors.InvalidRequest(f"server address {address.strip()!r}: port {port} is over 65535")
    channel_options = [*CHANNEL_OPTIONS, *options]
    if "," in target and not target.startswith(("ipv4:", "ipv6:")):
        # TLS checks certificates against the channel's authority: keep the first name, not an address.
        channel_options.append(("grpc.default_authority", target.split(",")[0].strip()))
        target, load_balancing = multi_address_target(target), load_balancing or "round_robin"
    else:
        health_check = False
    if load_balancing:
        channel_options.append(("grpc.service_config", service_config(load_balancing, health_check=health_check)))
    return target, channel_options


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata carrying a bearer token (none without one)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def open_channel(
    module: Any, target: str, tls: bool, root_certificates: bytes | None, options: list[tuple[str, str | int]]
) -> Any:
    """A channel from `module` (grpc, or grpc.aio): TLS when asked for or when a CA is given."""
    if tls or root_certificates:
        credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
        return module.secure_channel(target, credentials, options=options)
    return module.insecure_channel(target, options=options)


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except grpc.RpcError as error:
        raise translate_error(error) from None


def server_gone(error: grpc.RpcError) -> bool:
    """True for a call whose server went away or refused it while draining (UNAVAILABLE): another may answer."""
    return hasattr(error, "code") and error.code() == grpc.StatusCode.UNAVAILABLE


def retries_for(servers: int) -> int:
    """How often a call that found its server gone is made again: once per server where several can answer.

    gRPC's own retry policy cannot cover these calls: a streamed call is committed at its first progress event,
    and a request over the retry buffer (a report) at once. The health check takes a dead server out of the
    rotation, so the next try goes to a live one; the tries beyond one cover a pick made just before it did.
    """
    return servers if servers > 1 else 0


class _Connection:
    """The channel, stub and call settings both clients share; `_transport` is grpc or grpc.aio."""

    _transport: Any = grpc

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
        timeout: float | None = None,
        load_balancing: str | None = None,
        options: Sequence[tuple[str, str | int]] = (),
    ) -> None:
        target, channel_options = channel_setup(target, load_balancing, options, health_check=token is None)
        self.target = target
        self.timeout = timeout
        # A call that finds its server gone is made again, where several servers can answer it.
        self.retries = retries_for(target.count(",") + 1 if target.startswith(("ipv4:", "ipv6:")) else 1)
        self._metadata = auth_metadata(token)
        self._channel = open_channel(self._transport, target, tls, root_certificates, channel_options)
        self._stub = pb_grpc.ProfilerStub(self._channel)


class ProfilerClient(_Connection):
    """Talks to a profsvc server over gRPC and returns typed results.

    >>> client = ProfilerClient("gpu-host:50051", token="...")
    >>> result = client.profile(load_source("kernel.py"))

    A target that lists several servers ("h1:50051,h2:50051") opens one channel over all of them
    with gRPC's round_robin policy; `load_balancing` names another policy, `options` adds channel options.
    """

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def __enter__(self) -> ProfilerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def capabilities(self) -> Capabilities:
        """The server's GPUs, versions and metric sets."""
        return to_model(self._unary(self._stub.GetCapabilities, pb.GetCapabilitiesRequest()), Capabilities)

    def compile(self, source: KernelSource) -> CompileResult:
        """Build a source; a compile error comes back as `ok=False` with diagnostics."""
        request = pb.CompileRequest(source=to_proto(source, pb.KernelSource))
        reply = self._unary(self._stub.Compile, request)
        return to_model(reply.result, CompileResult)

    def profile(
        self,
        source: KernelSource,
        *,
        kernel_filter: KernelFilter | None = None,
        metric_set: str = "",
        metrics: Sequence[str] = (),
        derived: Sequence[str] = (),
        html_report: bool = False,
        skip_charts: bool = False,
        session_id: str = "",
        on_progress: Callable[[Progress], None] | None = None,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    ) -> ProfileResult:
        """Profile under ncu on the server; `on_progress` sees each progress event.

        With a `session_id`, the result carries a delta table against the session's previous result.
        `clock_control`: "none" (clocks as they are) or "base" (locked to the GPU's base clocks while ncu profiles).
        `skip_charts`: draw no roofline chart (roofline.png, roofline.svg), for a caller that will not download
        them: most of reading a small report.
        """
        request = profile_request(
            source, kernel_filter, metric_set, session_id, metrics, derived, html_report, clock_control, skip_charts
        )
        return self._stream(self._stub.Profile, request, ProfileResult, on_progress)

    def profile_repeated(
        self,
        source: KernelSource,
        *,
        repeats: int,
        kernel_filter: KernelFilter | None = None,
        metric_set: str = "",
        metrics: Sequence[str] = (),
        derived: Sequence[str] = (),
        html_report: bool = False,
        skip_charts: bool = False,
        session_id: str = "",
        on_progress: Callable[[Progress], None] | None = None,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    ) -> RepeatResult:
        """Profile the same request `repeats` times, one after another (each a full ncu run), and every figure's
        median, min, max and spread over them; `on_progress` sees events saying which repeat they belong to."""
        check_repeats(repeats)
        runs = []
        for index in range(repeats):
            runs.append(
                self.profile(
                    source,
                    kernel_filter=kernel_filter,
                    metric_set=metric_set,
                    metrics=metrics,
                    derived=derived,
                    html_report=html_report,
                    skip_charts=skip_charts,
                    clock_control=clock_control,
                    session_id=session_id,
                    on_progress=numbered_progress(on_progress, index, repeats) if on_progress else None,
                )
            )
        return aggregate_repeats(runs)

    def _stream(
        self,
        method: Callable[..., Any],
        request: Message,
        result_type: type[R],
        on_progress: Callable[[Progress], None] | None,
    ) -> R:
        """Call a server-streaming RPC: hand progress events over, return the final result.

        Where several servers can answer, a stream cut by its server's death is made again from the start
        (`on_progress` then sees the stages again).
        """
        retries = self.retries
        while True:
            try:
                for event in method(request, metadata=self._metadata, timeout=self.timeout):
                    if event.HasField("result"):
                        return to_model(event.result, result_type)
                    if on_progress is not None:
                        on_progress(to_model(event.progress, Progress))
                raise errors.InternalError("the server closed the stream without a result")
            except grpc.RpcError as error:
                if not (retries and server_gone(error)):
                    raise translate_error(error) from None
                retries -= 1

    def _unary(self, method: Callable[..., Any], request: Message | None) -> Any:
        """Call a unary RPC; where several servers can answer, again on another when its server is gone."""
        retries = self.retries
        while True:
            try:
                return method(request, metadata=self._metadata, timeout=self.timeout)
            except grpc.RpcError as error:
                if not (retries and server_gone(error)):
                    raise translate_error(error) from None
                retries -= 1

    def static_check(self, source: KernelSource, *, policy: StaticPolicy | None = None) -> StaticCheckResult:
        """AST rules for benchmark gaming over the candidate; nothing runs. `policy`: per-rule severities."""
        reply = self._unary(self._stub.StaticCheck, static_check_request(source, policy))
        return to_model(reply.result, StaticCheckResult)

    def check_correctness(
        self, source: KernelSource, *, trials: int = 0, precision: Precision | str = DEFAULT_PRECISION
    ) -> CorrectnessResult:
        """Run the candidate against the reference on fresh inputs (`trials` 0: the server's default, 5), both
        models and their inputs in `precision` ("fp32", "fp16", "bf16")."""
        request = trials_request(pb.CheckCorrectnessRequest, source, trials, precision)
        reply = self._unary(self._stub.CheckCorrectness, request)
        return to_model(reply.result, CorrectnessResult)

    def benchmark(
        self, source: KernelSource, *, trials: int = 0, precision: Precision | str = DEFAULT_PRECISION
    ) -> BenchmarkResult:
        """Time candidate and reference the same way (`trials` timed calls each; 0: the server's default), in
        `precision`."""
        request = trials_request(pb.BenchmarkRequest, source, trials, precision)
        reply = self._unary(self._stub.Benchmark, request)
        return to_model(reply.result, BenchmarkResult)

    def evaluate(
        self,
        source: KernelSource,
        *,
        trials: int = 0,
        skip_profile: bool = False,
        session_id: str = "",
        on_progress: Callable[[Progress], None] | None = None,
        policy: StaticPolicy | None = None,
        precision: Precision | str = DEFAULT_PRECISION,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
        skip_charts: bool = False,
    ) -> EvaluateResult:
        """Static check, compile, correctness, timing, memory, launches, SOL and a short profile.

        `policy` sets the static check's severities, and with them whether its findings fail the evaluation.
        `precision`: what correctness, timing and the profile run in; `clock_control`: the profile's ncu clocks;
        `skip_charts`: the profile draws no roofline chart (as `profile`).
        """
        request = evaluate_request(
            source, trials, skip_profile, session_id, policy, precision, clock_control, skip_charts
        )
        return self._stream(self._stub.Evaluate, request, EvaluateResult, on_progress)

    def analyze(
        self,
        report: bytes | str | Path,
        *,
        kernel_filter: KernelFilter | None = None,
        session_id: str = "",
        metrics: Sequence[str] = (),
        derived: Sequence[str] = (),
        html_report: bool = False,
        skip_charts: bool = False,
    ) -> ProfileResult:
        """Analyze an existing .ncu-rep (a path or its bytes) on the server (a session adds a delta table);
        `skip_charts`: draw no roofline chart (as `profile`)."""
        # The pieces are made again for each try: a stream is not replayed.
        reply = self._unary(
            lambda _, **options: self._stub.Analyze(
                analyze_requests(report, kernel_filter, session_id, metrics, derived, html_report, skip_charts),
                **options,
            ),
            None,
        )
        return to_model(reply.result, ProfileResult)

    def download_artifact(self, artifact_id: str, destination: str | Path) -> Path:
        """Save an artifact a result names into `destination` (a directory or a file path)."""
        dest = Path(destination)
        with _translated():
            chunks = self._stub.GetArtifact(
                pb.GetArtifactRequest(id=artifact_id), metadata=self._metadata, timeout=self.timeout
            )
            first = next(chunks)
            path = dest / first.name if dest.is_dir() else dest
            with path.open("wb") as out:
                out.write(first.chunk)
                for chunk in chunks:
                    out.write(chunk.chunk)
        return path


__all__ = [
    "ProfilerClient",
    "SourceKind",
    "analyze_requests",
    "channel_setup",
    "evaluate_request",
    "load_source",
    "multi_address_target",
    "profile_request",
    "service_config",
    "static_check_request",
    "translate_error",
]
