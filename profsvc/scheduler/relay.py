"""Carries the judge's commands to the candidate's process and its results back (see profsvc.worker.judge).

Both processes talk only to the server, each over its own control channel,
each from its own jail: the judge asks `candidate` (a command, and the files
in its cell the command names), the candidate's process asks `next` (the
result of the last command, and the files it wrote). The server moves each
named file from one cell into the other (plain files with plain names only:
nothing else crosses) and pairs the two requests. A candidate process that ends
answers the judge's pending command with `gone`; a judge that ends tells the
candidate `exit`.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from profsvc.jobfiles import remove_tree
from profsvc.proc import ProcessResult
from profsvc.worker.exchange import EXCHANGE_FILE
from profsvc.worker.faults import signal_name

EXIT = {"do": "exit"}


def move_files(names: Any, source: Path | None, target: Path | None, allowed: set[str] | None = None) -> list[str]:
    """Move the named plain files from one cell to the other; the names moved. Only exchange files cross
    (EXCHANGE_FILE), and of those only the `allowed` names where given."""
    if source is None or target is None or not isinstance(names, list):
        return []
    moved = []
    for name in names:
        if not isinstance(name, str) or not EXCHANGE_FILE.match(name):
            continue
        if allowed is not None and name not in allowed:
            continue
        path = source / name
        if path.is_symlink() or not path.is_file():
            continue
        os.replace(path, target / name)
        # Checked again where it landed, out of the sender's reach: it could have swapped the file for a link, a
        # FIFO or a folder between the check and the move.
        landed = os.lstat(target / name)
        if not stat.S_ISREG(landed.st_mode) or landed.st_nlink != 1:
            remove_tree(target / name)
            continue
        moved.append(name)
    return moved


class Relay:
    """One correctness check's or benchmark's pairing of a judge and a candidate's process."""

    def __init__(self) -> None:
        self.judge_cell: Path | None = None
        self.candidate_cell: Path | None = None
        self._commands: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._results: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listening = asyncio.Event()
        self._gone: dict[str, Any] | None = None
        # What the judge's pending command asked the candidate to write: nothing else comes back.
        self._expected: set[str] = set()

    async def judge_command(self, message: dict[str, Any]) -> dict[str, Any]:
        """The judge's `candidate` request: forward its command, answer with the candidate's result."""
        command = message.get("command")
        if not isinstance(command, dict) or not isinstance(command.get("do"), str):
            return {"ok": False, "error": "the command names nothing to do"}
        await self._listening.wait()
        if self._gone is not None:
            return self._gone
        move_files(message.get("files"), self.judge_cell, self.candidate_cell)
        self._expected = {command["out"]} if isinstance(command.get("out"), str) else set()
        await self._commands.put(command)
        if command["do"] == EXIT["do"]:
            return {"ok": True}
        return await self._results.get()

    async def candidate_next(self, message: dict[str, Any]) -> dict[str, Any]:
        """The candidate's `next` request: hand its result to the judge, answer with the judge's next command."""
        if message.get("result") is not None:
            files = move_files(message.get("files"), self.candidate_cell, self.judge_cell, self._expected)
            self._expected = set()
            await self._results.put({"result": message["result"], "files": files})
        self._listening.set()
        return await self._commands.get()

    def candidate_ended(self, process: ProcessResult | None) -> None:
        """The candidate's process is over: a pending or later command of the judge's is answered `gone`."""
        returncode = process.returncode if process is not None else -1
        output = process.output[-4000:] if process is not None else ""
        self._gone = {"gone": True, "returncode": returncode, "died": signal_name(returncode), "output": output}
        self._results.put_nowait(self._gone)
        self._listening.set()

    def judge_ended(self) -> None:
        """The judge is over: the candidate's process is told to exit."""
        self._commands.put_nowait(EXIT)
