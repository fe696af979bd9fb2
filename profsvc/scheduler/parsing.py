"""A caller's source read out of the server's process: validated, statically checked, its kernels named.

Python's parser keeps the interpreter for the whole parse (about two seconds for a MiB of short statements on a
two-core machine), so a source parsed in the server's process, even in a thread, would stall every other call
meanwhile. Parsers are a few processes of their own (`python -m profsvc.scheduler.parsing`), each started by the
first large text that finds none idle; a call waits for one of them, not the server. A parse that outlives its
call (cancelled, or past the time limit) is stopped with its process. A small text (the usual candidate: a few
KB) is read in a thread of the server's: its parse holds the server for milliseconds, less than a trip to a parser
costs on a first call.

Plain processes, not multiprocessing's: those re-run the host program's main module (an embedding script's too)
and may not be started from a daemonic process (a Dask worker's). A parser ignores the signals that stop the
server (it ends when the server closes its stdin), so calls in flight while the server stops still get their parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from profsvc_contract.errors import InternalError, InvalidRequest, Reason, ServerUnavailable

T = TypeVar("T")
log = logging.getLogger("profsvc.parsing")

# The size of a message's length, ahead of its pickle, on the parser's stdin and answer pipe.
_HEADER = struct.Struct("!Q")
# What a parser writes once it runs, before its first request.
_READY = b"R"
# A parse of the largest source takes seconds (tests/unit/test_staticcheck_linear.py); far past that, it is stopped.
PARSE_LIMIT_S = 120.0
# Up to this size a text is read in a thread: 64 KiB of short statements parse in about 0.09 s (two-core machine).
SMALL_TEXT_BYTES = 64 << 10


class _Parser:
    """One parser process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def call(self, payload: bytes) -> tuple[bool, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(_HEADER.pack(len(payload)) + payload)
        await self.process.stdin.drain()
        (size,) = _HEADER.unpack(await self.process.stdout.readexactly(_HEADER.size))
        return pickle.loads(await self.process.stdout.readexactly(size))

    def stop(self) -> None:
        # SIGKILL: a parser ignores the signals that stop the server. Not once reaped: its pid may be another's.
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()


class Parsers:
    """Parser processes, `workers` at most, on the server's event loop; `run` calls a module-level function in
    one of them."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._idle: list[_Parser] = []
        self._all: set[_Parser] = set()
        self._slots = asyncio.Semaphore(self.workers)
        self._reaping: set[asyncio.Task[int]] = set()
        self._closed = False

    async def run(self, function: Callable[..., T], *args: object, size: int) -> T:
        """`function(*args)` on a text of `size` bytes, in a parser (in a thread where the text is small); what it
        raises is raised here. A parser that dies (the parser crashed on the text, or ran out of memory) is
        replaced and the call tried once more on a new one; a second death, or a parse past PARSE_LIMIT_S, is
        the text's: InvalidRequest."""
        if size <= SMALL_TEXT_BYTES:
            return await asyncio.to_thread(function, *args)
        payload = pickle.dumps((function, args))
        async with self._slots:
            try:
                try:
                    ok, value = await self._once(payload, self._idle.pop() if self._idle else None)
                except (asyncio.IncompleteReadError, ConnectionError):
                    log.warning("a parser ended before answering a %d-byte source; trying a new one", size)
                    ok, value = await self._once(payload, None)
            except (asyncio.IncompleteReadError, ConnectionError):
                raise InvalidRequest(
                    "the source could not be read: the process parsing it died", Reason.SYNTAX_ERROR
                ) from None
            except TimeoutError:
                raise InvalidRequest(
                    f"the source could not be read within {PARSE_LIMIT_S:g} s", Reason.SYNTAX_ERROR
                ) from None
        if ok:
            return value
        raise value

    async def _once(self, payload: bytes, parser: _Parser | None) -> tuple[bool, Any]:
        parser = parser or await self._spawn()
        try:
            answer = await asyncio.wait_for(parser.call(payload), PARSE_LIMIT_S)
        except BaseException:
            # Dead, late or cancelled mid-answer: its next answer would be this call's, so it goes.
            self._discard(parser)
            raise
        if self._closed:
            self._discard(parser)
        else:
            self._idle.append(parser)
        return answer

    def _discard(self, parser: _Parser) -> None:
        parser.stop()
        self._all.discard(parser)
        # Waited for, so that its pipes close on this loop while it runs.
        reaping = asyncio.get_running_loop().create_task(parser.process.wait())
        self._reaping.add(reaping)
        reaping.add_done_callback(self._reaping.discard)

    async def _spawn(self) -> _Parser:
        if self._closed:
            raise ServerUnavailable("the server is stopping")
        # -P: the server's working folder is not on the parser's import path.
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",
            "-m",
            __name__,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        parser = _Parser(process)
        self._all.add(parser)
        assert process.stdout is not None
        try:
            ready = await asyncio.wait_for(process.stdout.readexactly(len(_READY)), PARSE_LIMIT_S)
        except BaseException:
            self._discard(parser)
            raise
        if ready != _READY:
            self._discard(parser)
            raise InternalError(f"a parser started wrongly: it wrote {ready!r} before it was ready")
        return parser

    async def close(self) -> None:
        """Stop every parser and wait for each to end; a call after this is UNAVAILABLE."""
        self._closed = True
        parsers = list(self._all)
        for parser in parsers:
            parser.stop()
        self._all.clear()
        self._idle.clear()
        await asyncio.gather(*(parser.process.wait() for parser in parsers), *self._reaping)


def main() -> None:
    """A parser: answer (function, args) pickles from stdin, one at a time (a function's module is imported as its
    first request is read)."""
    # The server's own stop (Ctrl-C, a service manager's SIGTERM to all its processes) is not the parser's: calls in
    # flight still get their answer, and the parser ends when the server closes its stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Answers go on a descriptor of their own; descriptor 1 becomes stderr, so nothing an import or a library
    # prints (from Python or C) falls into them.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    answers.write(_READY)
    answers.flush()
    requests = sys.stdin.buffer
    while header := requests.read(_HEADER.size):
        (size,) = _HEADER.unpack(header)
        function, args = pickle.loads(requests.read(size))
        try:
            answer = pickle.dumps((True, function(*args)))
        except Exception as error:  # raised again in the server, as the caller's error
            answer = _error_answer(error)
        answers.write(_HEADER.pack(len(answer)) + answer)
        answers.flush()


def _error_answer(error: Exception) -> bytes:
    """An error as the server can rebuild it (an exception that pickles may still not unpickle), else its text."""
    try:
        answer = pickle.dumps((False, error))
        pickle.loads(answer)
    except Exception:
        answer = pickle.dumps((False, RuntimeError(f"{type(error).__name__}: {error}")))
    return answer


if __name__ == "__main__":
    main()
