"""The profsvc exception tree, shared by the server and the client.

    ProfsvcError                  root; every error carries a Reason
    ├── InvalidRequest            INVALID_ARGUMENT    bad input (empty, too large, not UTF-8, ...)
    ├── NotFound                  NOT_FOUND           unknown artifact
    ├── PreconditionFailed        FAILED_PRECONDITION no GPU, no ncu, no nvcc on the server
    ├── ResourceExhausted         RESOURCE_EXHAUSTED  the job queue is full
    ├── DeadlineExceeded          DEADLINE_EXCEEDED   the job ran past its deadline
    ├── Unauthenticated           UNAUTHENTICATED     missing or wrong token
    ├── ServerUnavailable         UNAVAILABLE         no server at that address
    └── InternalError             INTERNAL            a server bug (details stay in the server log)

The server converts a raised error into a gRPC status with a google.rpc.ErrorInfo
detail (domain "profsvc", reason = Reason value); the client turns the status
back into the same class by that reason code, never by parsing message text.
A user's mistake inside the job (a compile error, a crash in their kernel) is a
result, not an exception.
"""

from __future__ import annotations

import enum

import grpc

ERROR_DOMAIN = "profsvc"


class Reason(enum.StrEnum):
    """Machine-readable reason codes carried in ErrorInfo.reason."""

    EMPTY_SOURCE = "EMPTY_SOURCE"
    SOURCE_TOO_LARGE = "SOURCE_TOO_LARGE"
    SOURCE_NOT_UTF8 = "SOURCE_NOT_UTF8"
    SYNTAX_ERROR = "SYNTAX_ERROR"
    MISSING_SYMBOL = "MISSING_SYMBOL"
    BAD_SOURCE_KIND = "BAD_SOURCE_KIND"
    BAD_FILTER = "BAD_FILTER"
    UNKNOWN_METRIC_SET = "UNKNOWN_METRIC_SET"
    BAD_POLICY = "BAD_POLICY"
    BAD_REPORT = "BAD_REPORT"
    BAD_ARGUMENT = "BAD_ARGUMENT"
    ARTIFACT_NOT_FOUND = "ARTIFACT_NOT_FOUND"
    NO_GPU = "NO_GPU"
    NO_NCU = "NO_NCU"
    NO_NVCC = "NO_NVCC"
    NO_TORCH = "NO_TORCH"
    NO_REPORT_READER = "NO_REPORT_READER"
    QUEUE_FULL = "QUEUE_FULL"
    DEADLINE = "DEADLINE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class ProfsvcError(Exception):
    """Root of every profsvc error; `reason` says which one."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    default_reason: Reason = Reason.INTERNAL

    def __init__(self, message: str, reason: Reason | None = None, request_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message


class InvalidRequest(ProfsvcError):
    """The request itself is wrong: fix the input."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = Reason.BAD_ARGUMENT


class NotFound(ProfsvcError):
    """The named artifact does not exist (or has expired)."""

    code = grpc.StatusCode.NOT_FOUND
    default_reason = Reason.ARTIFACT_NOT_FOUND


class PreconditionFailed(ProfsvcError):
    """The server lacks what the request needs (GPU, ncu, nvcc, torch)."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = Reason.NO_GPU


class ResourceExhausted(ProfsvcError):
    """The server's queue is full; try again later."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = Reason.QUEUE_FULL


class DeadlineExceeded(ProfsvcError):
    """The job did not finish within its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
    default_reason = Reason.DEADLINE


class Unauthenticated(ProfsvcError):
    """The call carried no token or a wrong one."""

    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = Reason.UNAUTHENTICATED


class ServerUnavailable(ProfsvcError):
    """No server answered at the address."""

    code = grpc.StatusCode.UNAVAILABLE
    default_reason = Reason.UNAVAILABLE


class InternalError(ProfsvcError):
    """A server bug; the traceback is in the server log under the request id."""

    code = grpc.StatusCode.INTERNAL
    default_reason = Reason.INTERNAL


# Which class each reason raises on the client side.
REASON_CLASSES: dict[Reason, type[ProfsvcError]] = {
    Reason.EMPTY_SOURCE: InvalidRequest,
    Reason.SOURCE_TOO_LARGE: InvalidRequest,
    Reason.SOURCE_NOT_UTF8: InvalidRequest,
    Reason.SYNTAX_ERROR: InvalidRequest,
    Reason.MISSING_SYMBOL: InvalidRequest,
    Reason.BAD_SOURCE_KIND: InvalidRequest,
    Reason.BAD_FILTER: InvalidRequest,
    Reason.UNKNOWN_METRIC_SET: InvalidRequest,
    Reason.BAD_POLICY: InvalidRequest,
    Reason.BAD_REPORT: InvalidRequest,
    Reason.BAD_ARGUMENT: InvalidRequest,
    Reason.ARTIFACT_NOT_FOUND: NotFound,
    Reason.NO_GPU: PreconditionFailed,
    Reason.NO_NCU: PreconditionFailed,
    Reason.NO_NVCC: PreconditionFailed,
    Reason.NO_TORCH: PreconditionFailed,
    Reason.NO_REPORT_READER: PreconditionFailed,
    Reason.QUEUE_FULL: ResourceExhausted,
    Reason.DEADLINE: DeadlineExceeded,
    Reason.UNAUTHENTICATED: Unauthenticated,
    Reason.UNAVAILABLE: ServerUnavailable,
    Reason.INTERNAL: InternalError,
}

# Status codes that carry no ErrorInfo (raised by grpc itself) map by code.
CODE_CLASSES: dict[grpc.StatusCode, type[ProfsvcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: PreconditionFailed,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNAVAILABLE: ServerUnavailable,
}

# CLI exit codes by class (0 success, 1 a result that is not ok).
EXIT_CODES: dict[type[ProfsvcError], int] = {
    InvalidRequest: 2,
    NotFound: 2,
    PreconditionFailed: 3,
    ServerUnavailable: 4,
    ResourceExhausted: 5,
    DeadlineExceeded: 6,
    Unauthenticated: 7,
    InternalError: 70,
    ProfsvcError: 70,
}


def error_for(reason: Reason, message: str, request_id: str = "") -> ProfsvcError:
    """Build the exception a reason code stands for."""
    return REASON_CLASSES[reason](message, reason, request_id)


def exit_code(error: ProfsvcError) -> int:
    """CLI exit code for an error."""
    for cls in type(error).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return 70
