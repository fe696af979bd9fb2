"""The README's laptop install, in a fresh virtual environment: the client alone, no server package, no torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import FIXTURES

ROOT = Path(__file__).parents[2]


def _run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, cwd=cwd)


def test_the_client_alone_installs_and_talks_to_a_server(served, tmp_path):
    venv = tmp_path / "laptop"
    assert _run(sys.executable, "-m", "venv", venv, cwd=tmp_path).returncode == 0
    # As the README says: pip install ./contract ./client (from a copy: a build leaves folders beside the sources)
    for package in ("contract", "client"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    installed = _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "./contract", "./client", cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    profsvc = venv / "bin" / "profsvc"

    declared = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["version"]
    version = _run(profsvc, "--version", cwd=tmp_path)
    assert version.returncode == 0 and f"profsvc-client {declared}" in version.stdout
    assert "profsvc " not in version.stdout.replace("profsvc-", "")  # no server package here
    for absent in ("profsvc", "torch"):
        probe = _run(venv / "bin" / "python", "-c", f"import {absent}", cwd=tmp_path)
        assert probe.returncode != 0, absent

    analyzed = _run(profsvc, "analyze", FIXTURES / "seed47_full.ncu-rep", "--server", served, cwd=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
    assert "vga_linear_kernel" in analyzed.stdout
    embedded = _run(profsvc, "analyze", FIXTURES / "seed47_full.ncu-rep", cwd=tmp_path)
    assert embedded.returncode != 0 and len(embedded.stderr.strip().splitlines()) == 1
    assert "the server package is not installed here" in embedded.stderr
