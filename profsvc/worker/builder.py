"""The builder process: builds one load_inline call for the server, in a jail, never loading the result.

Run as `python -m profsvc.worker.builder --request R --result OUT --cache DIR
--staging DIR` (or as a warm worker: `--standby DIR --server-pid PID`). Only
profsvc's own code runs here: the request holds the call's arguments (the
user's sources and flags), the build writes into the staging folder alone (the
cache is read-only in this jail), and the server installs what it finds there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from profsvc.build.inline_builder import build_inline, torch_builder
from profsvc.worker.standby import job_argv


def _warm() -> None:
    """torch and its extension builder, imported before the request arrives."""
    torch_builder()


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module's text)."""
    argv = job_argv(argv, warm=_warm)
    parser = argparse.ArgumentParser(description="profsvc builder")
    parser.add_argument("--request", required=True, help="JSON: the call's arguments and its cache key")
    parser.add_argument("--result", required=True, help="where to write the outcome (JSON)")
    parser.add_argument("--cache", required=True, help="the shared build cache (read-only)")
    parser.add_argument("--staging", required=True, help="where to build")
    args = parser.parse_args(argv)
    request = json.loads(Path(args.request).read_text())
    outcome = build_inline(request["arguments"], request["key"], Path(args.cache), Path(args.staging), torch_builder())
    Path(args.result).write_text(json.dumps(outcome.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
