"""Run a user's Python program as `python PROGRAM ARGS...` would, with profsvc's build wrapper installed.

    python -m profsvc.worker.program --status OUT --cache DIR -- PROGRAM [ARGS...]

The program runs as `__main__` (runpy), its folder on sys.path, sys.argv as
given. Its load_inline calls go to the trusted builder over the control channel
(profsvc.worker.inline_cache). What happened goes to the status file: ok, or
the exit status it ended with, or the exception located in the user's file,
and the NVTX ranges it opened (profsvc.worker.nvtx_seen). The process then
ends as a program does, its exception or exit message printed as Python
prints them (under ncu, its report is finished at the exit).
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from profsvc.worker.control import ControlChannel
from profsvc.worker.inline_cache import InlineRecorder, install
from profsvc.worker.nvtx_seen import RangesSeen, watch


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module's text)."""
    parser = argparse.ArgumentParser(description="profsvc program launcher")
    parser.add_argument("--status", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("program")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = Path(args.program)
    recorder = InlineRecorder()
    status: dict[str, Any] = {"ok": False, "stage": "running"}
    code = 0
    try:
        import torch  # noqa: F401  (only where installed: a program may not use it)
    except ImportError:
        pass
    else:
        user_text = program.read_text()
        install(
            Path(args.cache),
            lineinfo=True,
            user_text=user_text,
            recorder=recorder,
            channel=ControlChannel.from_environment(),
        )
    seen = RangesSeen()
    watch(seen)
    sys.argv = [str(program), *args.args]
    sys.path.insert(0, str(program.parent))
    try:
        runpy.run_path(str(program), run_name="__main__")
        status["ok"] = True
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)  # as Python prints sys.exit("message")
        status["ok"] = code == 0
        if code:
            status.update(kind="program_exit", message=f"{program.name} exited with status {code}")
    except BaseException as error:  # the user's code may raise anything
        from profsvc.worker.harness import located

        traceback.print_exc()  # as Python prints an uncaught exception
        status.update(located(error, {program.name}, program.name))
        code = 1
    status["nvtx_range_count"] = seen.count
    status["nvtx_ranges"] = seen.names
    status["builds"] = recorder.as_dicts()
    Path(args.status).write_text(json.dumps(status))
    return code


if __name__ == "__main__":
    sys.exit(main())
