"""A process that reads reports must not load grpc before ncu_report: IRange.actions_by_nvtx then crashes it."""

from __future__ import annotations

import subprocess
import sys


def test_the_report_worker_does_not_import_grpc():
    code = "import sys, profsvc.worker.analyze_report; print(sorted(m for m in sys.modules if m.startswith('grpc')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_client_package_still_exports_its_names():
    import profsvc_client

    for name in profsvc_client.__all__:
        assert getattr(profsvc_client, name).__name__ == name
