"""The worker harness ends a job without Python's teardown, keeping what the job printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import atexit, ctypes, sys
from profsvc.worker.harness import exit_without_teardown
atexit.register(lambda: print("teardown ran", flush=True))
sys.stdout.write("from python, no newline")
ctypes.CDLL(None).printf(b" and from C's stdio")
exit_without_teardown(3)
"""


def test_exit_without_teardown_keeps_the_output_and_skips_the_teardown():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # it unbuffers C's stdio as well
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "client")])
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "from python, no newline and from C's stdio"
