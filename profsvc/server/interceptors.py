"""Per-call bookkeeping: a request id for logs and errors, and the Prometheus request counter."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from profsvc.server.handlers import same_shape
from profsvc.server.status import new_request_id
from profsvc.telemetry import REQUEST_ID, Telemetry


def _code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "OK"


class RequestInterceptor(grpc.aio.ServerInterceptor):
    """Gives every call a request id (REQUEST_ID) and counts it by method and final status."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    def _count(self, method: str, code: str) -> None:
        self._telemetry.requests.labels(rpc=method, code=code).inc()

    def _unary(self, behavior: Callable[..., Awaitable[Any]], method: str) -> Callable[..., Awaitable[Any]]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = REQUEST_ID.set(new_request_id())
            code = "UNKNOWN"
            try:
                response = await behavior(request, context)
                code = _code(context)
                return response
            except grpc.aio.AbortError:
                code = _code(context)
                raise
            finally:
                self._count(method, code)
                REQUEST_ID.reset(token)

        return wrapped

    def _streaming(self, behavior: Callable[..., AsyncIterator[Any]], method: str) -> Callable[..., AsyncIterator[Any]]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            token = REQUEST_ID.set(new_request_id())
            code = "UNKNOWN"
            try:
                async for response in behavior(request, context):
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
        if handler is None or handler.request_streaming:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if handler.response_streaming:
            behavior = handler.unary_stream
            # A coroutine handler writes its messages with context.write (the health service's Watch, which
            # a channel's health check calls): awaited like a unary one, not iterated.
            wrap = self._unary if inspect.iscoroutinefunction(behavior) else self._streaming
            return same_shape(handler, wrap(behavior, method))
        return same_shape(handler, self._unary(handler.unary_unary, method))
