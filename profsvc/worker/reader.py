"""A report reader that stays: one process reads one caller's reports, one after another.

    python -m profsvc.worker.reader --standby DIR --server-pid PID

A fresh reader pays about a second of CPU before its first report (imports, the
tables, matplotlib, and NVIDIA's disassembler, which ncu_report starts on its
first SASS lookup); a reader that stays pays it once. It serves one caller's
reports only (profsvc.scheduler.readers): a report that subverted the native
reader would see that caller's later reports and nothing else.

It warms up, writes DIR/ready, then takes jobs from the FIFO DIR/job, one line
of JSON each: {"id": N, "argv": [...]}, the argv of profsvc.worker.analyze_report
with paths inside DIR/job-N. Each job's stdout goes to DIR/job-N/stdout, its
stderr to DIR/job-N/stderr, and its exit status, written last, to
DIR/job-N/status.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path

from profsvc.worker.analyze_report import main as analyze
from profsvc.worker.analyze_report import warm_up
from profsvc.worker.warm import READY, Channel, announce, split_standby_args

STDOUT, STDERR, STATUS = "stdout", "stderr", "status"


def job_folder(directory: Path, job_id: int) -> Path:
    """Where job `job_id` of the reader in `directory` keeps its files."""
    return directory / f"job-{job_id}"


def _run(folder: Path, argv: list[str]) -> int:
    """One analysis with its output in `folder`; its exit status (1 for an error it did not expect)."""
    with (
        open(folder / STDOUT, "w") as out,
        open(folder / STDERR, "w") as err,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            return analyze(argv)
        except SystemExit as exit_:  # argparse's usage errors
            return exit_.code if isinstance(exit_.code, int) else 2
        except Exception:  # reported as the job's failure; the reader takes the next job
            traceback.print_exc()
            return 1


def serve(directory: Path, server_pid: int) -> None:
    """Warm up, say so, then run each job the server sends until it goes away."""
    warm_up()
    channel = Channel(directory, server_pid)
    announce(directory / READY)
    while True:
        job = channel.line()
        folder = job_folder(directory, int(job["id"]))
        status = _run(folder, [str(a) for a in job["argv"]])
        announce(folder / STATUS, str(status))


def main() -> int:
    standby = split_standby_args(sys.argv[1:])
    if standby is None:
        print("usage: python -m profsvc.worker.reader --standby DIR --server-pid PID", file=sys.stderr)
        return 2
    os.umask(0o077)
    serve(*standby)
    return 0


if __name__ == "__main__":
    sys.exit(main())
