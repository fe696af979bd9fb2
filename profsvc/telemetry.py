"""Operations: Prometheus metrics and structured (JSON) logs that carry the request id.

One `Telemetry` per server instance, with its own registry, so several servers
in one process (tests, the embedded CLI) never collide.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# The id of the RPC being served, for log lines and error details.
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
# The stage seconds of the job being served, for its result's `timings` (None outside a job).
JOB_TIMINGS: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("job_timings", default=None)
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class Telemetry:
    """The server's metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "profsvc_requests", "RPCs answered, by method and gRPC status code", ["rpc", "code"], registry=self.registry
        )
        self.queue_depth = Gauge("profsvc_queue_depth", "Jobs admitted and not finished", registry=self.registry)
        self.stage_seconds = Histogram(
            "profsvc_job_stage_seconds",
            "Wall time of job stages",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.gpu_busy = Counter(
            "profsvc_gpu_busy_seconds", "Seconds a GPU lane was held by a job", ["gpu"], registry=self.registry
        )

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time one job stage."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.observe(name, time.monotonic() - start)

    def observe(self, stage: str, seconds: float) -> None:
        """Record a stage timed elsewhere (a worker's phase); also in the current job's timings."""
        self.stage_seconds.labels(stage=stage).observe(seconds)
        add_timing(stage, seconds)


def add_timing(part: str, seconds: float) -> None:
    """Add a part of a stage to the current job's timings (none outside a job): where a slow stage went."""
    timings = JOB_TIMINGS.get()
    if timings is not None:
        timings[part] = timings.get(part, 0.0) + seconds


@contextmanager
def collect_timings() -> Iterator[dict[str, float]]:
    """The current call's stage seconds (a new record where none is being kept; its `total` when it ends)."""
    current = JOB_TIMINGS.get()
    if current is not None:
        yield current
        return
    timings: dict[str, float] = {}
    token = JOB_TIMINGS.set(timings)
    start = time.monotonic()
    try:
        yield timings
    finally:
        timings["total"] = time.monotonic() - start
        JOB_TIMINGS.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per log line, with the request id of the RPC that logged it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "request_id": REQUEST_ID.get(),
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry)
