"""Bearer-token authentication for every RPC, health and reflection included."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from profsvc.server.handlers import same_shape
from profsvc.server.status import new_request_id, to_status
from profsvc_client.errors import Reason, Unauthenticated

_PREFIX = "bearer "


def _token_of(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str:
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            return text[len(_PREFIX) :] if text.lower().startswith(_PREFIX) else ""
    return ""


def _deny(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that only answers UNAUTHENTICATED."""
    status = to_status(Unauthenticated(message, Reason.UNAUTHENTICATED), new_request_id())

    async def abort(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort_with_status(status)

    async def abort_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort_with_status(status)
        # A streaming handler must be an async generator, even one that never yields.
        for never in ():
            yield never

    return same_shape(handler, abort_stream if handler.response_streaming else abort)


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls whose `authorization: Bearer <token>` does not match (constant-time compare)."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        offered = _token_of(handler_call_details.invocation_metadata)
        if not offered:
            return _deny(handler, "this server requires a bearer token (--token-file on the client, or PROFSVC_TOKEN)")
        if not hmac.compare_digest(offered.encode(), self._expected):
            return _deny(handler, "the bearer token is not valid for this server")
        return handler
