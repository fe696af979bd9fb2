"""The gRPC servicer of profsvc.v1.Profiler: validation, scheduling, conversion, errors."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc
from google.protobuf.message import Message
from pydantic import BaseModel, ValidationError

from profsvc import __version__
from profsvc.config import ServerConfig
from profsvc.kinds import Verb
from profsvc.metrics.catalog import load_catalog
from profsvc.ncu.metric_sets import metric_sets
from profsvc.scheduler.evaluation import benchmark, check_correctness, evaluate, static_check
from profsvc.scheduler.jobs import ProfileSpec, ProgressSink, SourceSpec
from profsvc.scheduler.profiling import profile
from profsvc.scheduler.readers import CALLER
from profsvc.scheduler.reading import analyze
from profsvc.scheduler.scheduler import Scheduler
from profsvc.scheduler.sessions import SessionKey
from profsvc.server.auth import Authenticator
from profsvc.server.status import new_request_id, status_for_exception
from profsvc.server.uploads import Uploads
from profsvc.server.validation import (
    validate_clock_control,
    validate_count,
    validate_derived,
    validate_filter,
    validate_metric_set,
    validate_metrics,
    validate_policy,
    validate_precision,
    validate_session_id,
    validate_source,
    validate_upload_name,
)
from profsvc.telemetry import REQUEST_ID
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract._proto import profiler_pb2_grpc as pb_grpc
from profsvc_contract.convert import enum_value, to_model, to_proto
from profsvc_contract.errors import InvalidRequest, NotFound, Reason
from profsvc_contract.models import (
    Capabilities,
    EvaluateResult,
    FigureInfo,
    KernelFilter,
    KernelSource,
    MetricSet,
    ProfileResult,
    Progress,
    ServerInfo,
    StaticPolicy,
)

T = TypeVar("T")
ARTIFACT_CHUNK = 1024 * 1024
# How much of an unknown artifact id an error message repeats.
MAX_SHOWN_ID = 100


M = TypeVar("M", bound=BaseModel)


def _request_model(message: Message, model: type[M]) -> M:
    """A request's message as its model; a value no model allows (an unknown enum number) is INVALID_ARGUMENT."""
    try:
        return to_model(message, model)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequest(f"{model.__name__}.{where}: {first['msg']}") from None


class ProfilerServicer(pb_grpc.ProfilerServicer):
    """Answers each RPC; every error leaves as a gRPC status with an ErrorInfo reason."""

    def __init__(self, config: ServerConfig, scheduler: Scheduler, authenticator: Authenticator) -> None:
        self.config = config
        self.scheduler = scheduler
        self.authenticator = authenticator
        self.uploads = Uploads(config.uploads_dir, config.limits.max_report_bytes, config.disk_budget_bytes)

    def _session(self, context: grpc.aio.ServicerContext, session_id: str) -> SessionKey | None:
        """The caller's session of this id (None for none): sessions are kept per identity."""
        session_id = validate_session_id(session_id)
        if not session_id:
            return None
        identity = self.authenticator.identity_of(context.invocation_metadata())
        # The token interceptor has refused a call without an identity before it got here.
        assert identity is not None
        return SessionKey(identity=identity, id=session_id)

    def _served(self, result: ProfileResult) -> ProfileResult:
        """The result naming the server that answered: a batch's rows keep it whichever server of several it was."""
        result.server = ServerInfo(
            version=__version__, host=socket.gethostname(), driver_version=self.scheduler.host.driver_version
        )
        return result

    def _as_caller(self, context: grpc.aio.ServicerContext) -> None:
        """Name the call's caller for what it runs: its reports go to readers of its own (scheduler.readers)."""
        CALLER.set(self.authenticator.identity_of(context.invocation_metadata()))

    async def _guard(self, context: grpc.aio.ServicerContext, method: str, call: Callable[[], Awaitable[T]]) -> T:
        request_id = REQUEST_ID.get() or new_request_id()
        self._as_caller(context)
        try:
            return await call()
        except (asyncio.CancelledError, grpc.aio.AbortError):
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
                isolation=self.scheduler.isolation(),
                figures=[FigureInfo(name=e.name, unit=e.unit, label=e.label) for e in load_catalog().entries.values()],
                host=socket.gethostname(),
            )
            return to_proto(capabilities, pb.GetCapabilitiesResponse)

        return await self._guard(context, "GetCapabilities", call)

    async def Compile(self, request: pb.CompileRequest, context: grpc.aio.ServicerContext) -> pb.CompileResponse:
        """Build a source; compile errors are results."""

        async def call() -> pb.CompileResponse:
            source = await self._source(request.source, Verb.COMPILE)
            result = await self.scheduler.compile(source)
            return pb.CompileResponse(result=to_proto(result, pb.CompileResult))

        return await self._guard(context, "Compile", call)

    async def _stream(
        self,
        context: grpc.aio.ServicerContext,
        method: str,
        run: Callable[[ProgressSink], Awaitable[BaseModel]],
        progress_message: Callable[[Progress], Message],
        result_message: Callable[[BaseModel], Message],
    ) -> AsyncIterator[Message]:
        """Stream progress events while `run` works, then its result; errors end the stream as a status."""
        events: asyncio.Queue[Progress | BaseModel | BaseException] = asyncio.Queue()

        async def work() -> None:
            try:
                events.put_nowait(await run(events.put_nowait))
            except Exception as error:  # handed to the stream below, which turns it into a status
                events.put_nowait(error)

        self._as_caller(context)  # before the task is made: it runs in a copy of this context
        task = asyncio.create_task(work())
        try:
            while True:
                event = await events.get()
                if isinstance(event, Progress):
                    yield progress_message(event)
                elif isinstance(event, BaseModel):
                    yield result_message(event)
                    return
                else:
                    await context.abort_with_status(
                        status_for_exception(event, REQUEST_ID.get() or new_request_id(), method)
                    )
        finally:
            # A client that cancels or passes its deadline lands here: its job is killed.
            task.cancel()

    async def Profile(self, request: pb.ProfileRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
        """Stream progress events, then the result."""

        async def run(progress: ProgressSink) -> ProfileResult:
            metrics = validate_metrics(request.metrics)
            spec = ProfileSpec(
                source=await self._source(request.source, Verb.PROFILE),
                kernel_filter=validate_filter(_request_model(request.filter, KernelFilter), self.config.limits),
                metric_set=validate_metric_set(request.metric_set),
                metrics=metrics,
                derived=validate_derived(request.derived, metrics),
                html_report=request.html_report,
                charts=not request.skip_charts,
                session=self._session(context, request.session_id),
                clock_control=validate_clock_control(enum_value(request, "clock_control")),
            )
            return self._served(await profile(self.scheduler, spec, progress))

        async for message in self._stream(
            context,
            "Profile",
            run,
            lambda p: pb.ProfileResponse(progress=to_proto(p, pb.Progress)),
            lambda r: pb.ProfileResponse(result=to_proto(r, pb.ProfileResult)),
        ):
            yield message

    async def StaticCheck(
        self, request: pb.StaticCheckRequest, context: grpc.aio.ServicerContext
    ) -> pb.StaticCheckResponse:
        """AST rules over the candidate; nothing runs."""

        async def call() -> pb.StaticCheckResponse:
            source = await self._source(request.source, Verb.LINT)
            policy = validate_policy(_request_model(request.policy, StaticPolicy))
            result = await self.scheduler.parsers.run(static_check, source, policy, size=source.text_size)
            return pb.StaticCheckResponse(result=to_proto(result, pb.StaticCheckResult))

        return await self._guard(context, "StaticCheck", call)

    async def CheckCorrectness(
        self, request: pb.CheckCorrectnessRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckCorrectnessResponse:
        """Correctness trials against the reference."""

        async def call() -> pb.CheckCorrectnessResponse:
            source = await self._problem(request, Verb.CHECK)
            trials = validate_count(request.trials, "trials", self.config.limits.max_trials)
            result = await check_correctness(self.scheduler, source, trials)
            return pb.CheckCorrectnessResponse(result=to_proto(result, pb.CorrectnessResult))

        return await self._guard(context, "CheckCorrectness", call)

    async def Benchmark(self, request: pb.BenchmarkRequest, context: grpc.aio.ServicerContext) -> pb.BenchmarkResponse:
        """Candidate and reference timed the same way."""

        async def call() -> pb.BenchmarkResponse:
            source = await self._problem(request, Verb.TIME)
            timed_calls = validate_count(request.trials, "trials", self.config.limits.max_timed_calls)
            result = await benchmark(self.scheduler, source, timed_calls)
            return pb.BenchmarkResponse(result=to_proto(result, pb.BenchmarkResult))

        return await self._guard(context, "Benchmark", call)

    async def Evaluate(self, request: pb.EvaluateRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
        """Everything for a submission; progress, then the result."""

        async def run(progress: ProgressSink) -> EvaluateResult:
            source = await self._problem(request, Verb.EVALUATE)
            trials = validate_count(request.trials, "trials", self.config.limits.max_trials)
            session = self._session(context, request.session_id)
            policy = validate_policy(_request_model(request.policy, StaticPolicy))
            clock_control = validate_clock_control(enum_value(request, "clock_control"))
            result = await evaluate(
                self.scheduler,
                source,
                trials,
                request.skip_profile,
                progress,
                session,
                policy,
                clock_control,
                charts=not request.skip_charts,
            )
            self._served(result.profile)
            return result

        async for message in self._stream(
            context,
            "Evaluate",
            run,
            lambda p: pb.EvaluateResponse(progress=to_proto(p, pb.Progress)),
            lambda r: pb.EvaluateResponse(result=to_proto(r, pb.EvaluateResult)),
        ):
            yield message

    async def _source(self, source: pb.KernelSource, verb: Verb) -> SourceSpec:
        # Parsing a large source holds a Python process for seconds: the scheduler's parsers do it.
        size = len(source.main.content) + len(source.reference.content)
        model = _request_model(source, KernelSource)
        return await self.scheduler.parsers.run(validate_source, model, self.config.limits, verb, size=size)

    async def _problem(
        self, request: pb.CheckCorrectnessRequest | pb.BenchmarkRequest | pb.EvaluateRequest, verb: Verb
    ) -> SourceSpec:
        """The source of a request that runs a problem's models, in the precision the request names."""
        precision = validate_precision(enum_value(request, "precision"))
        return dataclasses.replace(await self._source(request.source, verb), precision=precision)

    async def Analyze(
        self, requests: AsyncIterator[pb.AnalyzeRequest], context: grpc.aio.ServicerContext
    ) -> pb.AnalyzeResponse:
        """Read an uploaded .ncu-rep, received piece by piece into a file."""

        async def call() -> pb.AnalyzeResponse:
            first = await anext(requests, None)
            if first is None:
                raise InvalidRequest("the upload ended before its first message arrived", Reason.EMPTY_SOURCE)
            # Everything the first message says is checked before the rest of the upload is read.
            filename = validate_upload_name(first.filename)
            kernel_filter = validate_filter(_request_model(first.filter, KernelFilter), self.config.limits)
            metrics = validate_metrics(first.metrics)
            derived = validate_derived(first.derived, metrics)
            session = self._session(context, first.session_id)
            async with self.uploads.receive(first, requests) as upload:
                result = await analyze(
                    self.scheduler,
                    upload,
                    filename,
                    kernel_filter,
                    None,
                    session,
                    metrics,
                    derived,
                    html_report=first.html_report,
                    charts=not first.skip_charts,
                )
            return pb.AnalyzeResponse(result=to_proto(self._served(result), pb.ProfileResult))

        return await self._guard(context, "Analyze", call)

    async def GetArtifact(
        self, request: pb.GetArtifactRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GetArtifactResponse]:
        """Stream an artifact the server registered for a result, in 1 MiB chunks."""
        opened = self.scheduler.workspaces.open(request.id)
        if opened is None:
            shown = request.id if len(request.id) <= MAX_SHOWN_ID else request.id[:MAX_SHOWN_ID] + "..."
            error = NotFound(f"no artifact {shown!r} (it may have expired)", Reason.ARTIFACT_NOT_FOUND)
            request_id = REQUEST_ID.get() or new_request_id()
            await context.abort_with_status(status_for_exception(error, request_id, "GetArtifact"))
            return
        name, handle = opened
        with handle:
            size = os.fstat(handle.fileno()).st_size
            yield pb.GetArtifactResponse(name=name, size=size, chunk=handle.read(ARTIFACT_CHUNK))
            while chunk := handle.read(ARTIFACT_CHUNK):
                yield pb.GetArtifactResponse(chunk=chunk)
