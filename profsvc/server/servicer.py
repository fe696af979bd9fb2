"""The gRPC servicer of profsvc.v1.Profiler: validation, scheduling, conversion, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc

from profsvc import __version__
from profsvc.config import ServerConfig
from profsvc.ncu.metric_sets import metric_sets
from profsvc.scheduler.jobs import ProfileSpec
from profsvc.scheduler.scheduler import Scheduler
from profsvc.server.status import new_request_id, status_for_exception
from profsvc.server.validation import validate_filter, validate_metric_set, validate_source
from profsvc_client._proto import profiler_pb2 as pb
from profsvc_client._proto import profiler_pb2_grpc as pb_grpc
from profsvc_client.convert import to_model, to_proto
from profsvc_client.errors import InvalidRequest, NotFound, Reason
from profsvc_client.models import Capabilities, KernelFilter, KernelSource, MetricSet, ProfileResult, Progress

T = TypeVar("T")
ARTIFACT_CHUNK = 1024 * 1024


class ProfilerServicer(pb_grpc.ProfilerServicer):
    """Answers each RPC; every error leaves as a gRPC status with an ErrorInfo reason."""

    def __init__(self, config: ServerConfig, scheduler: Scheduler) -> None:
        self.config = config
        self.scheduler = scheduler

    async def _guard(self, context: grpc.aio.ServicerContext, method: str, call: Callable[[], Awaitable[T]]) -> T:
        request_id = new_request_id()
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the edge: every error becomes a status here
            await context.abort_with_status(status_for_exception(error, request_id, method))
            raise AssertionError("unreachable: abort_with_status raises") from error

    async def GetCapabilities(
        self, request: pb.GetCapabilitiesRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetCapabilitiesResponse:
        """The server's GPUs, tool versions and metric sets."""

        async def call() -> pb.GetCapabilitiesResponse:
            host = self.scheduler.host
            capabilities = Capabilities(
                server_version=__version__,
                gpus=host.gpus,
                driver_version=host.driver_version,
                ncu_version=host.ncu.version if host.ncu else "",
                metric_sets=[MetricSet(name=s.name, description=s.description) for s in metric_sets().values()],
                profiling_available=not host.unavailable_reason,
                unavailable_reason=host.unavailable_reason,
                nvcc_version=host.nvcc_version,
            )
            return to_proto(capabilities, pb.GetCapabilitiesResponse)

        return await self._guard(context, "GetCapabilities", call)

    async def Compile(self, request: pb.CompileRequest, context: grpc.aio.ServicerContext) -> pb.CompileResponse:
        """Build a source; compile errors are results."""

        async def call() -> pb.CompileResponse:
            source = validate_source(to_model(request.source, KernelSource), self.config.limits)
            result = await self.scheduler.compile(source)
            return pb.CompileResponse(result=to_proto(result, pb.CompileResult))

        return await self._guard(context, "Compile", call)

    async def Profile(
        self, request: pb.ProfileRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ProfileResponse]:
        """Stream progress events, then the result."""
        events: asyncio.Queue[Progress | ProfileResult | BaseException] = asyncio.Queue()

        async def run() -> None:
            try:
                spec = ProfileSpec(
                    source=validate_source(to_model(request.source, KernelSource), self.config.limits),
                    kernel_filter=validate_filter(to_model(request.filter, KernelFilter), self.config.limits),
                    metric_set=validate_metric_set(request.metric_set),
                )
                events.put_nowait(await self.scheduler.profile(spec, events.put_nowait))
            except Exception as error:  # handed to the stream below, which turns it into a status
                events.put_nowait(error)

        task = asyncio.create_task(run())
        try:
            while True:
                event = await events.get()
                if isinstance(event, Progress):
                    yield pb.ProfileResponse(progress=to_proto(event, pb.Progress))
                elif isinstance(event, ProfileResult):
                    yield pb.ProfileResponse(result=to_proto(event, pb.ProfileResult))
                    return
                else:
                    await context.abort_with_status(status_for_exception(event, new_request_id(), "Profile"))
        finally:
            # A client that cancels or passes its deadline lands here: its job is killed.
            task.cancel()

    async def Analyze(self, request: pb.AnalyzeRequest, context: grpc.aio.ServicerContext) -> pb.AnalyzeResponse:
        """Read an uploaded .ncu-rep."""

        async def call() -> pb.AnalyzeResponse:
            if not request.report:
                raise InvalidRequest("the uploaded report is empty", Reason.EMPTY_SOURCE)
            limit = self.config.limits.max_report_bytes
            if len(request.report) > limit:
                raise InvalidRequest(
                    f"the report is {len(request.report):,} bytes; the limit is {limit:,}",
                    Reason.SOURCE_TOO_LARGE,
                )
            kernel_filter = validate_filter(to_model(request.filter, KernelFilter), self.config.limits)
            result = await self.scheduler.analyze(request.report, request.filename, kernel_filter)
            return pb.AnalyzeResponse(result=to_proto(result, pb.ProfileResult))

        return await self._guard(context, "Analyze", call)

    async def GetArtifact(
        self, request: pb.GetArtifactRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GetArtifactResponse]:
        """Stream an artifact in 1 MiB chunks."""
        path = self.scheduler.workspaces.resolve(request.id)
        if path is None:
            error = NotFound(f"no artifact {request.id!r} (it may have expired)", Reason.ARTIFACT_NOT_FOUND)
            await context.abort_with_status(status_for_exception(error, new_request_id(), "GetArtifact"))
            return
        size = path.stat().st_size
        with path.open("rb") as handle:
            yield pb.GetArtifactResponse(name=path.name, size=size, chunk=handle.read(ARTIFACT_CHUNK))
            while chunk := handle.read(ARTIFACT_CHUNK):
                yield pb.GetArtifactResponse(chunk=chunk)
