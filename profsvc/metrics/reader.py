"""Load NVIDIA's own report reader, `ncu_report`.

On a GPU host the copy that ships with the ncu that wrote the report is
preferred (the `extras/python` folder of the Nsight Compute install); elsewhere
the `ncu-report` package from PyPI, which needs no GPU.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

# Where Nsight Compute installs put extras/python, most specific first.
_INSTALL_GLOBS = (
    "/usr/local/cuda/nsight-compute-*/extras/python",
    "/usr/local/cuda-*/nsight-compute-*/extras/python",
    "/opt/nvidia/nsight-compute/*/extras/python",
)


class ReaderUnavailable(RuntimeError):
    """No ncu_report module could be imported."""


def ncu_extras_dirs() -> list[Path]:
    """extras/python folders of the Nsight Compute installs on this machine, preferred first."""
    found: list[Path] = []
    override = os.environ.get("PROFSVC_NCU_REPORT_PATH")
    if override:
        found.append(Path(override))
    ncu = shutil.which("ncu")
    if ncu:
        real = Path(ncu).resolve()
        found.append(real.parent / "extras" / "python")
        cuda_root = real.parent.parent
        found.extend(
            Path(p) for p in sorted(glob.glob(str(cuda_root / "nsight-compute-*" / "extras" / "python")), reverse=True)
        )
    for pattern in _INSTALL_GLOBS:
        found.extend(Path(p) for p in sorted(glob.glob(pattern), reverse=True))
    return [p for p in dict.fromkeys(found) if (p / "ncu_report.py").is_file()]


def load_reader() -> ModuleType:
    """Import ncu_report, from the local ncu install when there is one."""
    for folder in ncu_extras_dirs():
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(str(folder))
    try:
        return importlib.import_module("ncu_report")
    except ImportError as error:
        raise ReaderUnavailable(
            "no ncu_report module: install Nsight Compute, or the reader extra (in the repository: "
            "pip install -e '.[reader]')"
        ) from error
