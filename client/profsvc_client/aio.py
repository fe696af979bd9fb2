"""`AsyncProfilerClient`: the same verbs as `ProfilerClient`, for asyncio harnesses (grpc.aio)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from pydantic import BaseModel

from profsvc_client.client import (
    _Connection,
    analyze_requests,
    evaluate_request,
    profile_request,
    server_gone,
    static_check_request,
    translate_error,
    trials_request,
)
from profsvc_client.repeats import aggregate_repeats, check_repeats, numbered_progress
from profsvc_contract import errors
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.convert import to_model, to_proto
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
    StaticCheckResult,
    StaticPolicy,
)

R = TypeVar("R", bound=BaseModel)
ProgressCallback = Callable[[Progress], Awaitable[None] | None]


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    try:
        yield
    except grpc.RpcError as error:
        raise translate_error(error) from None


class AsyncProfilerClient(_Connection):
    """Talks to a profsvc server over grpc.aio.

    >>> async with AsyncProfilerClient("gpu-host:50051") as client:
    ...     result = await client.evaluate(load_source("kernel.py"))
    """

    _transport = grpc.aio

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncProfilerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _unary(self, method: Callable[..., Any], request: Message | None) -> Any:
        """Where several servers can answer, a call that found its server gone is made again (as the sync client)."""
        retries = self.retries
        while True:
            try:
                return await method(request, metadata=self._metadata, timeout=self.timeout)
            except grpc.RpcError as error:
                if not (retries and server_gone(error)):
                    raise translate_error(error) from None
                retries -= 1

    async def _stream(
        self, method: Callable[..., Any], request: Message, result_type: type[R], on_progress: ProgressCallback | None
    ) -> R:
        retries = self.retries
        while True:
            try:
                async for event in method(request, metadata=self._metadata, timeout=self.timeout):
                    if event.HasField("result"):
                        return to_model(event.result, result_type)
                    if on_progress is not None:
                        awaited = on_progress(to_model(event.progress, Progress))
                        if awaited is not None:
                            await awaited
                raise errors.InternalError("the server closed the stream without a result")
            except grpc.RpcError as error:
                if not (retries and server_gone(error)):
                    raise translate_error(error) from None
                retries -= 1

    async def capabilities(self) -> Capabilities:
        """The server's GPUs, versions and metric sets."""
        return to_model(await self._unary(self._stub.GetCapabilities, pb.GetCapabilitiesRequest()), Capabilities)

    async def compile(self, source: KernelSource) -> CompileResult:
        """Build a source; a compile error comes back as `ok=False` with diagnostics."""
        reply = await self._unary(self._stub.Compile, pb.CompileRequest(source=to_proto(source, pb.KernelSource)))
        return to_model(reply.result, CompileResult)

    async def static_check(self, source: KernelSource, *, policy: StaticPolicy | None = None) -> StaticCheckResult:
        """AST rules for benchmark gaming over the candidate; nothing runs. `policy`: per-rule severities."""
        request = static_check_request(source, policy)
        return to_model((await self._unary(self._stub.StaticCheck, request)).result, StaticCheckResult)

    async def check_correctness(
        self, source: KernelSource, *, trials: int = 0, precision: Precision | str = DEFAULT_PRECISION
    ) -> CorrectnessResult:
        """Run the candidate against the reference on fresh inputs, in `precision`."""
        request = trials_request(pb.CheckCorrectnessRequest, source, trials, precision)
        return to_model((await self._unary(self._stub.CheckCorrectness, request)).result, CorrectnessResult)

    async def benchmark(
        self, source: KernelSource, *, trials: int = 0, precision: Precision | str = DEFAULT_PRECISION
    ) -> BenchmarkResult:
        """Time candidate and reference the same way, in `precision`."""
        request = trials_request(pb.BenchmarkRequest, source, trials, precision)
        return to_model((await self._unary(self._stub.Benchmark, request)).result, BenchmarkResult)

    async def profile(
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
        on_progress: ProgressCallback | None = None,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    ) -> ProfileResult:
        """Profile under ncu; `on_progress` (plain or async) sees each progress event."""
        request = profile_request(
            source, kernel_filter, metric_set, session_id, metrics, derived, html_report, clock_control, skip_charts
        )
        return await self._stream(self._stub.Profile, request, ProfileResult, on_progress)

    async def profile_repeated(
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
        on_progress: ProgressCallback | None = None,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
    ) -> RepeatResult:
        """Profile the same request `repeats` times, one after another (each a full ncu run), and every figure's
        statistics over them (as the sync client)."""
        check_repeats(repeats)
        runs = []
        for index in range(repeats):
            runs.append(
                await self.profile(
                    source,
                    kernel_filter=kernel_filter,
                    metric_set=metric_set,
                    metrics=metrics,
                    derived=derived,
                    html_report=html_report,
                    skip_charts=skip_charts,
                    session_id=session_id,
                    clock_control=clock_control,
                    on_progress=numbered_progress(on_progress, index, repeats) if on_progress else None,
                )
            )
        return aggregate_repeats(runs)

    async def evaluate(
        self,
        source: KernelSource,
        *,
        trials: int = 0,
        skip_profile: bool = False,
        session_id: str = "",
        on_progress: ProgressCallback | None = None,
        policy: StaticPolicy | None = None,
        precision: Precision | str = DEFAULT_PRECISION,
        clock_control: ClockControl | str = DEFAULT_CLOCK_CONTROL,
        skip_charts: bool = False,
    ) -> EvaluateResult:
        """Static check, compile, correctness, timing, memory, launches, SOL and a short profile (as the sync
        client)."""
        request = evaluate_request(
            source, trials, skip_profile, session_id, policy, precision, clock_control, skip_charts
        )
        return await self._stream(self._stub.Evaluate, request, EvaluateResult, on_progress)

    async def analyze(
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
        """Analyze an existing .ncu-rep (a path or its bytes) on the server (as the sync client)."""
        # The pieces are made again for each try: a stream is not replayed.
        reply = await self._unary(
            lambda _, **options: self._stub.Analyze(
                analyze_requests(report, kernel_filter, session_id, metrics, derived, html_report, skip_charts),
                **options,
            ),
            None,
        )
        return to_model(reply.result, ProfileResult)

    async def download_artifact(self, artifact_id: str, destination: str | Path) -> Path:
        """Save an artifact a result names into `destination` (a directory or a file path)."""
        dest = Path(destination)
        path: Path | None = None
        async with _translated():
            call = self._stub.GetArtifact(pb.GetArtifactRequest(id=artifact_id), metadata=self._metadata)
            async for chunk in call:
                if path is None:
                    path = dest / chunk.name if dest.is_dir() else dest
                    path.write_bytes(b"")
                with path.open("ab") as out:
                    out.write(chunk.chunk)
        if path is None:
            raise errors.InternalError("the server sent no chunk of the artifact")
        return path
