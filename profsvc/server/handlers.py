"""Rebuild a gRPC method handler around another behavior, keeping its shape and serializers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def same_shape(
    handler: grpc.RpcMethodHandler,
    behavior: Callable[..., Any],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """A handler like `handler` (streaming kinds, serializers) that runs `behavior` instead (and, where given,
    reads requests with `request_deserializer`)."""
    make = _FACTORIES[(handler.request_streaming, handler.response_streaming)]
    return make(
        behavior,
        request_deserializer=request_deserializer or handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
