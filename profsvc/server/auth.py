"""Bearer-token authentication for every RPC, health and reflection included, and the caller's identity.

Each token of the server's token file is an identity of its own (sessions are kept per identity); without
tokens every caller is the one anonymous identity. A call is refused before the server reads any of its
request: the refusing handler takes the request as a stream it never reads, so a large message is not
received to be thrown away.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc
from pydantic import SecretStr

from profsvc.server.status import new_request_id, to_status
from profsvc_contract.errors import Reason, Unauthenticated

_PREFIX = "bearer "
ANONYMOUS = "anonymous"
Metadata = Iterable[tuple[str, str | bytes]]


def bearer_token(authorization: str | bytes | None) -> str:
    """The token of an `authorization: Bearer <token>` value ('' for none or another scheme)."""
    if authorization is None:
        return ""
    text = authorization.decode(errors="replace") if isinstance(authorization, bytes) else authorization
    return text[len(_PREFIX) :] if text.lower().startswith(_PREFIX) else ""


def _authorization(metadata: Metadata | None) -> str | bytes | None:
    for key, value in metadata or ():
        if key.lower() == "authorization":
            return value
    return None


class Authenticator:
    """Tells which identity a token stands for (constant-time comparisons against every token)."""

    def __init__(self, tokens: Mapping[str, SecretStr]) -> None:
        self._tokens = [(name, token.get_secret_value().encode()) for name, token in tokens.items()]

    @property
    def required(self) -> bool:
        """True when calls must carry a token."""
        return bool(self._tokens)

    def identify(self, offered: str) -> str | None:
        """The identity a bearer token stands for; ANONYMOUS when no token is required; None when refused."""
        if not self._tokens:
            return ANONYMOUS
        offered_bytes = offered.encode()
        found = None
        for name, expected in self._tokens:
            # Every token is compared, so the time taken does not tell which one nearly matched.
            if hmac.compare_digest(offered_bytes, expected):
                found = name
        return found

    def identity_of(self, metadata: Metadata | None) -> str | None:
        """The identity of a call's metadata (see identify)."""
        return self.identify(bearer_token(_authorization(metadata)))


def _deny(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler answering UNAUTHENTICATED that never reads the request (taken as a stream, left unread)."""
    status = to_status(Unauthenticated(message, Reason.UNAUTHENTICATED), new_request_id())

    async def abort(requests: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort_with_status(status)

    async def abort_stream(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await context.abort_with_status(status)
        # A streaming handler must be an async generator, even one that never yields.
        for never in ():
            yield never

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort_stream, response_serializer=handler.response_serializer)
    return grpc.stream_unary_rpc_method_handler(abort, response_serializer=handler.response_serializer)


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls whose `authorization: Bearer <token>` names no identity of the server."""

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        authorization = _authorization(handler_call_details.invocation_metadata)
        if not bearer_token(authorization):
            return _deny(handler, "this server requires a bearer token (--token-file on the client, or PROFSVC_TOKEN)")
        if self._authenticator.identify(bearer_token(authorization)) is None:
            return _deny(handler, "the bearer token is not valid for this server")
        return handler
