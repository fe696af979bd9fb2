"""Per-call bookkeeping: a request id for logs and errors, the Prometheus request counter, and the answer to a
request whose bytes are not the method's message (INVALID_ARGUMENT in one line, where grpc would answer
UNKNOWN with a Python exception name and log a traceback per request)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from profsvc.server.handlers import same_shape
from profsvc.server.status import new_request_id, status_for_exception
from profsvc.telemetry import REQUEST_ID, Telemetry
from profsvc_contract.errors import InvalidRequest, Reason


class _Malformed:
    """Stands for a request message whose bytes do not decode."""


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError:
            return _Malformed()

    return parse


async def _refuse_malformed(context: grpc.aio.ServicerContext, method: str) -> None:
    error = InvalidRequest(f"the {method} request does not decode as its protobuf message", Reason.BAD_ARGUMENT)
    await context.abort_with_status(status_for_exception(error, REQUEST_ID.get(), method))


async def _checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, method: str) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, _Malformed):
            await _refuse_malformed(context, method)
        yield request


def _code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "OK"


class RequestInterceptor(grpc.aio.ServerInterceptor):
    """Gives every call a request id (REQUEST_ID), counts it by method and final status, refuses malformed input."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    def _count(self, method: str, code: str) -> None:
        self._telemetry.requests.labels(rpc=method, code=code).inc()

    def _request(self, request: Any, context: grpc.aio.ServicerContext, streaming: bool, method: str) -> Any:
        return _checked(request, context, method) if streaming else request

    def _single(
        self, behavior: Callable[..., Awaitable[Any]], method: str, streaming: bool
    ) -> Callable[..., Awaitable[Any]]:
        """A handler with one response (unary or streaming request)."""

        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = REQUEST_ID.set(new_request_id())
            code = "UNKNOWN"
            try:
                if isinstance(request, _Malformed):
                    await _refuse_malformed(context, method)
                response = await behavior(self._request(request, context, streaming, method), context)
                code = _code(context)
                return response
            except grpc.aio.AbortError:
                code = _code(context)
                raise
            finally:
                self._count(method, code)
                REQUEST_ID.reset(token)

        return wrapped

    def _streaming(
        self, behavior: Callable[..., AsyncIterator[Any]], method: str, streaming: bool
    ) -> Callable[..., AsyncIterator[Any]]:
        """A handler with a stream of responses (unary or streaming request)."""

        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            token = REQUEST_ID.set(new_request_id())
            code = "UNKNOWN"
            try:
                if isinstance(request, _Malformed):
                    await _refuse_malformed(context, method)
                async for response in behavior(self._request(request, context, streaming, method), context):
                    yield response
                code = _code(context)
            except grpc.aio.AbortError:
                code = _code(context)
                raise
            finally:
                self._count(method, code)
                REQUEST_ID.reset(token)

        return wrapped

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        streaming = handler.request_streaming
        if handler.response_streaming:
            behavior = handler.stream_stream if streaming else handler.unary_stream
            # A coroutine handler writes its messages with context.write (the health service's Watch, which
            # a channel's health check calls): awaited like a single-answer one, not iterated.
            if inspect.iscoroutinefunction(behavior):
                wrapped: Callable[..., Any] = self._single(behavior, method, streaming)
            else:
                wrapped = self._streaming(behavior, method, streaming)
        else:
            behavior = handler.stream_unary if streaming else handler.unary_unary
            wrapped = self._single(behavior, method, streaming)
        return same_shape(handler, wrapped, request_deserializer=_tolerant(handler.request_deserializer))
