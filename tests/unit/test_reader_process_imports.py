"""A process that reads reports must load ncu_report before grpc and matplotlib: IRange.actions_by_nvtx crashes it
otherwise (grpcio 1.85.3, matplotlib 3.11.2, ncu-report 2025.3.1)."""

from __future__ import annotations

import subprocess
import sys


def test_the_report_worker_imports_neither_grpc_nor_matplotlib():
    code = "import sys, profsvc.worker.analyze_report; print(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('grpc', 'matplotlib')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_client_package_still_exports_its_names():
    import profsvc_client

    for name in profsvc_client.__all__:
        assert getattr(profsvc_client, name).__name__ == name
