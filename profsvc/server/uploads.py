"""Receive an Analyze upload (a stream of pieces) into a file, within a size limit and a disk budget.

The file is written piece by piece, so the server never holds more of a report in memory than one message.
Uploads being received together may reserve at most the disk budget: each reserves the size its first
message declares, and may not send more than that.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from profsvc.worker.warm import pid_alive
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.errors import InvalidRequest, Reason, ResourceExhausted


class Uploads:
    """The folder of uploads being received, and the bytes they have reserved."""

    def __init__(self, folder: Path, max_bytes: int, budget_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.budget_bytes = budget_bytes
        self.reserved = 0
        folder.mkdir(parents=True, exist_ok=True)
        # What a server stopped by SIGKILL was receiving (files are named after the receiving server's pid).
        for stale in folder.glob("*-*.part"):
            pid = stale.name.split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                stale.unlink(missing_ok=True)

    def check_size(self, size: int) -> None:
        """Refuse a declared size before anything is received."""
        if size == 0:
            raise InvalidRequest("the uploaded report is empty", Reason.EMPTY_SOURCE)
        if size > self.max_bytes:
            raise InvalidRequest(
                f"the report is {size:,} bytes; the limit is {self.max_bytes:,}", Reason.SOURCE_TOO_LARGE
            )
        if self.reserved + size > self.budget_bytes:
            raise ResourceExhausted(
                f"the uploads being received hold {self.reserved:,} bytes of the server's {self.budget_bytes:,}"
                " byte budget; try again later",
                Reason.QUEUE_FULL,
            )

    @contextlib.asynccontextmanager
    async def receive(self, first: pb.AnalyzeRequest, rest: AsyncIterator[pb.AnalyzeRequest]) -> AsyncIterator[Path]:
        """The upload's file, whole; removed on exit unless moved away meanwhile."""
        self.check_size(first.size)
        self.reserved += first.size
        path = self.folder / f"{os.getpid()}-{uuid.uuid4().hex}.part"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                received = await _copy(first, rest, out)
            if received != first.size:
                raise InvalidRequest(
                    f"the upload ended after {received:,} bytes; its first message said {first.size:,}",
                    Reason.BAD_REPORT,
                )
            yield path
        finally:
            self.reserved -= first.size
            path.unlink(missing_ok=True)


async def _copy(first: pb.AnalyzeRequest, rest: AsyncIterator[pb.AnalyzeRequest], out: BinaryIO) -> int:
    """Write the upload's pieces to `out`; the bytes received."""
    received = 0
    message = first
    while True:
        received += len(message.chunk)
        if received > first.size:
            raise InvalidRequest(
                f"the upload sends more than the {first.size:,} bytes its first message said", Reason.BAD_REPORT
            )
        out.write(message.chunk)
        message = await anext(rest, None)
        if message is None:
            return received
        if message.filename or message.session_id or message.size or message.HasField("filter"):
            raise InvalidRequest(
                "only the first message of an upload names the file, its size and the options", Reason.BAD_ARGUMENT
            )
