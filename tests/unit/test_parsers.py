"""The parsers: a source's text is read in processes of their own; one that dies, outlives its call or runs past
the time limit is stopped and replaced."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest

from profsvc.config import Limits
from profsvc.kinds import Verb
from profsvc.scheduler import parsing
from profsvc.scheduler.parsing import SMALL_TEXT_BYTES, Parsers
from profsvc.server.validation import validate_source
from profsvc_contract.errors import InvalidRequest, Reason, ServerUnavailable
from profsvc_contract.models import KernelSource, SourceFile

# A text this large goes to a parser; a smaller one is read in a thread of the caller's.
LARGE = SMALL_TEXT_BYTES + 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_parsers_run_in_processes_of_their_own_and_replace_one_that_dies():
    async def scenario() -> None:
        parsers = Parsers(2)
        try:
            pids = {await parsers.run(os.getpid, size=LARGE) for _ in range(4)}
            assert os.getpid() not in pids and len(pids) <= 2
            assert await parsers.run(os.getpid, size=SMALL_TEXT_BYTES) == os.getpid()
            # A parser that dies on every try: the call is refused in one line, and the next call finds a parser.
            with pytest.raises(InvalidRequest) as refused:
                await parsers.run(os._exit, 3, size=LARGE)
            assert refused.value.reason == Reason.SYNTAX_ERROR and "died" in str(refused.value)
            assert await parsers.run(os.getpid, size=LARGE) != os.getpid()
        finally:
            await parsers.close()

    asyncio.run(scenario())


def test_a_parse_that_outlives_its_call_or_its_limit_is_stopped(monkeypatch):
    async def scenario() -> list[int]:
        parsers = Parsers(1)
        try:
            pid = await parsers.run(os.getpid, size=LARGE)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(parsers.run(time.sleep, 60, size=LARGE), 0.5)
            monkeypatch.setattr(parsing, "PARSE_LIMIT_S", 0.5)
            second = await parsers.run(os.getpid, size=LARGE)
            with pytest.raises(InvalidRequest, match=r"within 0\.5 s"):
                await parsers.run(time.sleep, 60, size=LARGE)
            third = await parsers.run(os.getpid, size=LARGE)
            return [pid, second, third]
        finally:
            await parsers.close()

    pid, second, third = asyncio.run(scenario())
    assert len({pid, second, third}) == 3
    time.sleep(0.5)
    assert not _alive(pid) and not _alive(second)


def test_a_refusal_in_a_parser_reaches_the_caller_as_it_was_raised():
    source = KernelSource(main=SourceFile(name="bad.py", content=b"def forward(:\n"))

    async def scenario() -> None:
        parsers = Parsers(1)
        try:
            await parsers.run(validate_source, source, Limits(), Verb.PROFILE, size=LARGE)
        finally:
            await parsers.close()

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(scenario())
    assert refused.value.reason == Reason.SYNTAX_ERROR and str(refused.value).startswith("bad.py:1:")


def test_a_parser_outlives_the_servers_stop_signals_and_noise_but_not_its_close(tmp_path, monkeypatch):
    # The server's working folder holds a module that shadows one the parser imports (pydantic, for the source's
    # model), and the parser's import path a module that prints, from Python and from C, as it is imported (with
    # the first request that calls it): neither reaches the parser or its answers.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pydantic.py").write_text("raise SystemExit('the working folder was on the import path')\n")
    noisy = tmp_path / "modules"
    noisy.mkdir()
    (noisy / "noisy_import.py").write_text(
        "import os\nprint('hello')\nos.write(1, b'raw bytes')\n\n\ndef pid():\n    return os.getpid()\n"
    )
    # (An empty entry in PYTHONPATH would name the working folder.)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(noisy), os.environ.get("PYTHONPATH")])))
    sys.path.insert(0, str(noisy))
    import noisy_import

    source = KernelSource(main=SourceFile(name="bad.py", content=b"def forward(:\n"))

    async def scenario() -> list[int]:
        parsers = Parsers(1)
        pid = await parsers.run(noisy_import.pid, size=LARGE)
        with pytest.raises(InvalidRequest, match=r"^bad\.py:1:"):
            await parsers.run(validate_source, source, Limits(), Verb.PROFILE, size=LARGE)
        for stop in (signal.SIGINT, signal.SIGTERM):
            os.kill(pid, stop)
        await asyncio.sleep(0.2)
        assert await parsers.run(os.getpid, size=LARGE) == pid
        # Closed while a parse runs: that call is told the server is stopping, and no parser is left.
        slow = asyncio.ensure_future(parsers.run(time.sleep, 60, size=LARGE))
        await asyncio.sleep(0.5)
        await parsers.close()
        with pytest.raises(ServerUnavailable):
            await slow
        return [pid]

    try:
        (pid,) = asyncio.run(scenario())
    finally:
        sys.path.remove(str(noisy))
        sys.modules.pop("noisy_import", None)
    assert not _alive(pid)
