"""`python -m profsvc serve ...`: the server's command, without the client's CLI."""

from __future__ import annotations

import argparse
import sys

from profsvc import __version__
from profsvc.cli import add_serve
from profsvc_contract import errors


def main(argv: list[str] | None = None) -> int:
    """Parse `serve`'s arguments and run it; one line on stderr and the error's exit code on failure."""
    parser = argparse.ArgumentParser(prog="python -m profsvc", description="the profsvc server")
    parser.add_argument("--version", action="version", version=f"profsvc {__version__}")
    add_serve(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.run_command(args))
    except errors.ProfsvcError as error:
        print(f"profsvc: error: {error.message} [{error.reason.value}]", file=sys.stderr)
        return errors.exit_code(error)


if __name__ == "__main__":
    sys.exit(main())
