"""What tools/gen_protos.py and tools/gen_schema.py share: write generated files, or check the committed ones."""

from __future__ import annotations

import argparse
from pathlib import Path


def write_or_check(description: str, files: dict[str, str], out_dir: Path, what: str, command: str) -> int:
    """Write `files` into `out_dir`; with --check on the command line, only compare and return 1 when stale."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    if parser.parse_args().check:
        stale = [n for n, t in files.items() if not (out_dir / n).is_file() or (out_dir / n).read_text() != t]
        if stale:
            print(f"stale {what}: " + ", ".join(stale) + f" (run {command})")
            return 1
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text)
    return 0
