"""Convert errors into gRPC statuses at the edge: reason codes travel as google.rpc.ErrorInfo."""

from __future__ import annotations

import logging
import uuid

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from profsvc_contract.errors import ERROR_DOMAIN, InternalError, ProfsvcError

log = logging.getLogger("profsvc.server")


def new_request_id() -> str:
    """Short id tying a client's error to the server's log line."""
    return uuid.uuid4().hex[:12]


def to_status(error: ProfsvcError, request_id: str) -> grpc.Status:
    """The gRPC status (with ErrorInfo detail) for a profsvc error."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason.value, domain=ERROR_DOMAIN, metadata={"request_id": request_id}
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    code = getattr(code_pb2, error.code.name)
    return rpc_status.to_status(status_pb2.Status(code=code, message=error.message, details=[detail]))


def status_for_exception(error: BaseException, request_id: str, method: str) -> grpc.Status:
    """Map any exception; an unexpected one is logged with its traceback and reported as INTERNAL only."""
    if isinstance(error, ProfsvcError):
        log.info("%s request %s: %s (%s)", method, request_id, error.message, error.reason.value)
        return to_status(error, request_id)
    log.error("%s request %s failed", method, request_id, exc_info=error)
    return to_status(
        InternalError("internal server error; the server log has the details under the request id"), request_id
    )
