"""The builder process: builds one load_inline or load call for the server, in a jail, never loading the result.

Run as `python -m profsvc.worker.builder --request R --result OUT --cache DIR
--staging DIR` (or as a warm worker: `--standby DIR --server-pid PID`). Only
profsvc's own code runs here: the request holds the call's arguments (the
user's sources and flags) and the files of the job's folders it reads; the
build writes into the staging folder alone (the cache is read-only in this
jail), and the server installs what it finds there. A request `{"op":
"prepare"}` makes the server's precompiled glue headers instead, before any
build and with no user input: the only precompiled headers the server installs.
A request `{"op": "bind", "plan": ...}` makes the shared binding of a list of
signatures (profsvc.build.binding), from the plan alone, without user flags.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from profsvc.build.binding import BindingPlan
from profsvc.build.inline_builder import (
    build_call,
    made_binding,
    make_binding,
    prepare_server_headers,
    server_pch,
    torch_builders,
)
from profsvc.build.request import BuildRequest
from profsvc.worker.warm import job_argv


def _warm() -> None:
    """torch and its extension builder, imported before the request arrives."""
    torch_builders()


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module's text)."""
    argv = job_argv(argv, warm=_warm)
    parser = argparse.ArgumentParser(description="profsvc builder")
    parser.add_argument("--request", required=True, help="JSON: the call's request and its cache key")
    parser.add_argument("--result", required=True, help="where to write the outcome (JSON)")
    parser.add_argument("--cache", required=True, help="the shared build cache (read-only)")
    parser.add_argument("--staging", required=True, help="where to build")
    args = parser.parse_args(argv)
    message = json.loads(Path(args.request).read_text())
    cache, staging = Path(args.cache), Path(args.staging)
    if message.get("op") == "prepare":
        outcome = {"headers": prepare_server_headers(cache, staging)}
    elif message.get("op") == "bind":
        outcome = {"key": make_binding(cache, staging, BindingPlan.from_message(message["plan"]), torch_builders())}
    else:
        request = BuildRequest.from_message(message)
        glue = functools.partial(server_pch, cache, staging)
        binding = functools.partial(made_binding, cache)
        outcome = build_call(request, message["key"], staging, torch_builders(), glue, binding).as_dict()
    Path(args.result).write_text(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
